package gitserve

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

// File names in the service's directory.
const (
	caCertName = "ca.pem"     // 0644: mounted read-only into every container
	caKeyName  = "ca-key.pem" // 0600: never leaves the data dir
)

// Validity of the certificates. The CA lives as long as the data dir (ten
// years, then delete both files to get a new one); server certificates are
// issued at every start for the IP they serve, so a short life costs nothing.
const (
	caValidity     = 10 * 365 * 24 * time.Hour
	serverValidity = 90 * 24 * time.Hour
)

// authority is the service's CA.
type authority struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

// loadOrCreateCA reads the CA from dir, or creates it when neither file
// exists. One file without the other is an error rather than a silent new
// CA: containers and users may trust the old certificate.
func loadOrCreateCA(dir string) (*authority, bool, error) {
	certPath, keyPath := filepath.Join(dir, caCertName), filepath.Join(dir, caKeyName)
	certPEM, cerr := os.ReadFile(certPath)
	keyPEM, kerr := os.ReadFile(keyPath)
	switch {
	case errors.Is(cerr, fs.ErrNotExist) && errors.Is(kerr, fs.ErrNotExist):
		ca, err := createCA(certPath, keyPath)
		return ca, true, err
	case cerr != nil:
		return nil, false, fmt.Errorf("read git service CA certificate %s: %w (remove %s too to make a new CA)", certPath, cerr, keyPath)
	case kerr != nil:
		return nil, false, fmt.Errorf("read git service CA key %s: %w (remove %s too to make a new CA)", keyPath, kerr, certPath)
	}
	// The key must stay private even if someone loosened its mode.
	if st, err := os.Stat(keyPath); err == nil && st.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(keyPath, 0o600); err != nil {
			return nil, false, fmt.Errorf("restrict git service CA key %s to 0600: %w", keyPath, err)
		}
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, false, fmt.Errorf("git service CA in %s is not PEM (remove %s and %s to make a new CA)", dir, certPath, keyPath)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, false, fmt.Errorf("parse git service CA certificate %s: %w", certPath, err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, false, fmt.Errorf("parse git service CA key %s: %w", keyPath, err)
	}
	if !cert.IsCA || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, false, fmt.Errorf("git service CA in %s: certificate and key do not belong together (remove both to make a new CA)", dir)
	}
	if time.Now().After(cert.NotAfter) {
		return nil, false, fmt.Errorf("git service CA %s expired on %s (remove %s and %s to make a new CA)", certPath, cert.NotAfter.Format(time.DateOnly), certPath, keyPath)
	}
	return &authority{cert: cert, key: key, certPEM: certPEM}, false, nil
}

func createCA(certPath, keyPath string) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate git service CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          randSerial(),
		Subject:               pkix.Name{CommonName: "aimi git service CA", Organization: []string{"aimi"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create git service CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse new git service CA certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode git service CA key: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	// Key first: a crash between the two leaves a key without a
	// certificate, which loadOrCreateCA reports instead of overwriting.
	if err := atomicfile.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, fmt.Errorf("write git service CA key: %w", err)
	}
	if err := atomicfile.WriteFile(certPath, certPEM, 0o644); err != nil {
		return nil, fmt.Errorf("write git service CA certificate: %w", err)
	}
	return &authority{cert: cert, key: key, certPEM: certPEM}, nil
}

// serverCert issues a certificate for ip, signed by the CA, kept in memory
// only.
func (a *authority) serverCert(ip net.IP) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generate git service server key: %w", err)
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
		return tls.Certificate{}, fmt.Errorf("sign git service server certificate for %s: %w", ip, err)
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
