package daemonca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/aimi-tools/swarm/internal/atomicfile"
)

// File names in the CA's directory.
const (
	CertName = "ca.pem"     // 0644: mounted read-only into every container
	KeyName  = "ca-key.pem" // 0600: never leaves the data dir
)

// Validity of the certificates. The CA lives as long as the data dir (ten
// years, then delete both files to get a new one); server certificates are
// issued at every start for the IP they serve, so a short life costs nothing.
const (
	caValidity     = 10 * 365 * 24 * time.Hour
	serverValidity = 90 * 24 * time.Hour
)

// Authority is the daemon's CA: the services it serves to sandboxes (the
// git service, the model gateway) present certificates it signs.
type Authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// CertPEM is the CA certificate, PEM-encoded (public).
	CertPEM []byte
}

// LoadOrCreate reads the CA from dir, or creates it when neither file
// exists (created reports which). One file without the other is an error rather than a silent new
// CA: containers and users may trust the old certificate.
func LoadOrCreate(dir string) (a *Authority, created bool, err error) {
	certPath, keyPath := filepath.Join(dir, CertName), filepath.Join(dir, KeyName)
	certPEM, cerr := os.ReadFile(certPath)
	keyPEM, kerr := os.ReadFile(keyPath)
	switch {
	case errors.Is(cerr, fs.ErrNotExist) && errors.Is(kerr, fs.ErrNotExist):
		ca, err := createCA(certPath, keyPath)
		return ca, true, err
	case cerr != nil:
		return nil, false, fmt.Errorf("read daemon CA certificate %s: %w (remove %s too to make a new CA)", certPath, cerr, keyPath)
	case kerr != nil:
		return nil, false, fmt.Errorf("read daemon CA key %s: %w (remove %s too to make a new CA)", keyPath, kerr, certPath)
	}
	// The key must stay private even if someone loosened its mode.
	if st, err := os.Stat(keyPath); err == nil && st.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(keyPath, 0o600); err != nil {
			return nil, false, fmt.Errorf("restrict daemon CA key %s to 0600: %w", keyPath, err)
		}
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, false, fmt.Errorf("daemon CA in %s is not PEM (remove %s and %s to make a new CA)", dir, certPath, keyPath)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, false, fmt.Errorf("parse daemon CA certificate %s: %w", certPath, err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, false, fmt.Errorf("parse daemon CA key %s: %w", keyPath, err)
	}
	if !cert.IsCA || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, false, fmt.Errorf("daemon CA in %s: certificate and key do not belong together (remove both to make a new CA)", dir)
	}
	if time.Now().After(cert.NotAfter) {
		return nil, false, fmt.Errorf("daemon CA %s expired on %s (remove %s and %s to make a new CA)", certPath, cert.NotAfter.Format(time.DateOnly), certPath, keyPath)
	}
	return &Authority{cert: cert, key: key, CertPEM: certPEM}, false, nil
}

func createCA(certPath, keyPath string) (*Authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate daemon CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          randSerial(),
		Subject:               pkix.Name{CommonName: "aimi daemon CA", Organization: []string{"aimi"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create daemon CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse new daemon CA certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode daemon CA key: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	// Key first: a crash between the two leaves a key without a
	// certificate, which loadOrCreateCA reports instead of overwriting.
	if err := atomicfile.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, fmt.Errorf("write daemon CA key: %w", err)
	}
	if err := atomicfile.WriteFile(certPath, certPEM, 0o644); err != nil {
		return nil, fmt.Errorf("write daemon CA certificate: %w", err)
	}
	return &Authority{cert: cert, key: key, CertPEM: certPEM}, nil
}

// ServerCert issues a certificate for ip, signed by the CA, kept in memory
// only.
func (a *Authority) ServerCert(ip net.IP) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generate server key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: randSerial(),
		Subject:      pkix.Name{CommonName: ip.String(), Organization: []string{"aimi"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(serverValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{ip},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("sign server certificate for %s: %w", ip, err)
	}
	return tls.Certificate{Certificate: [][]byte{der, a.cert.Raw}, PrivateKey: key}, nil
}

func randSerial() *big.Int {
	// 128 random bits; rand.Int only fails if the system's randomness does,
	// and then so would the key generation just before.
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}
