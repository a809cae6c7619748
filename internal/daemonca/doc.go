// Package daemonca is the daemon's certificate authority: one CA kept in
// the daemon's data directory (the certificate 0644, mounted read-only into
// every sandbox; the key 0600, never leaving the directory) and server
// certificates issued from it for the addresses the daemon serves sandboxes
// on. Every service a sandbox reaches over HTTPS (the git service, the
// model gateway) uses the same CA, so a sandbox trusts one file.
package daemonca
