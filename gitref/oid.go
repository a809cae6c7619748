package gitref

// ValidOID reports whether s is a full object id as git prints and sends
// them: SHA-1 (40) or SHA-256 (64) in lowercase hex.
func ValidOID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
