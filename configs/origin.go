package configs

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// maxCABundle bounds what is read of git.origin_ca: a CA bundle is small.
const maxCABundle = 4 << 20

// originCA checks git.origin_ca (empty: none) and returns it.
func originCA(path string, bad func(k, val, why, fix string)) string {
	if path == "" {
		return ""
	}
	if err := checkCABundle(path); err != nil {
		bad("git.origin_ca", path, err.Error(), "give the absolute path of a PEM file holding the CA certificate of origin's server")
	}
	return path
}

// checkCABundle: path is absolute, a regular file of at most maxCABundle
// bytes, with at least one PEM certificate.
func checkCABundle(path string) error {
	if !filepath.IsAbs(path) {
		return errors.New("is not an absolute path")
	}
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return fmt.Errorf("cannot be read: %w", err)
	case !fi.Mode().IsRegular():
		return errors.New("is not a regular file")
	case fi.Size() > maxCABundle:
		return fmt.Errorf("is larger than %d bytes", maxCABundle)
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("cannot be read: %w", err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		return errors.New("holds no PEM certificate")
	}
	return nil
}
