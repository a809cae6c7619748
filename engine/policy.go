package engine

// KeptCapabilities are the only capabilities a sandbox keeps after dropping
// ALL. Each is there because git or a coding agent working on a checkout as
// root needs it:
//
//   - CHOWN: package managers and tar extraction set file owners.
//   - DAC_OVERRIDE: root writing into a workspace (bind mount) owned by
//     another uid.
//   - FOWNER: chmod/utime on files owned by another uid (git checkout of an
//     existing workspace, npm/pip caches).
//   - SETUID, SETGID: an entrypoint that drops from root to an unprivileged
//     user (with no-new-privileges, nothing can gain privileges back).
//   - KILL: stopping the agent's child processes when they run as another
//     uid.
//
// Everything else (NET_RAW, MKNOD, SYS_CHROOT, NET_BIND_SERVICE, AUDIT_WRITE,
// SETFCAP, SETPCAP, FSETID) stays dropped. A fresh slice on every call.
func KeptCapabilities() []string {
	return []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL"}
}
