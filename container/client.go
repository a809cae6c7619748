package container

import (
	"net/http"
	"os"
	"time"

	"github.com/docker/docker/client"
	"github.com/docker/go-connections/sockets"
)

// WithTransport wraps the client's HTTP transport (the daemon counts
// engine requests this way); see NewClient for when it cannot.
func WithTransport(wrap func(http.RoundTripper) http.RoundTripper) Option {
	return func(d *Docker) { d.wrap = wrap }
}

// NewClient is an Engine API client configured from the environment, with
// version negotiation and, for a unix socket or plain TCP endpoint, its
// transport wrapped by wrap (nil: none). wrapped reports whether it was:
// over TLS the transport stays the client library's own, which finds the
// TLS settings for attach by the transport's concrete type.
func NewClient(wrap func(http.RoundTripper) http.RoundTripper) (cli *client.Client, wrapped bool, err error) {
	cli, err = client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil || wrap == nil || os.Getenv(client.EnvOverrideCertPath) != "" {
		return cli, false, err
	}
	u, err := client.ParseHostURL(cli.DaemonHost())
	if err != nil || (u.Scheme != "unix" && u.Scheme != "tcp") {
		return cli, false, nil
	}
	// The client library's own transport settings (defaultHTTPClient).
	tr := &http.Transport{MaxIdleConns: 6, IdleConnTimeout: 30 * time.Second}
	if err := sockets.ConfigureTransport(tr, u.Scheme, u.Host); err != nil {
		return cli, false, nil
	}
	cli.Close()
	hc := &http.Client{Transport: wrap(tr), CheckRedirect: client.CheckRedirect}
	cli, err = client.NewClientWithOpts(client.FromEnv, client.WithHTTPClient(hc), client.WithAPIVersionNegotiation())
	return cli, err == nil, err
}
