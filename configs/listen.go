package configs

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// metricsListen is the address metrics.listen names: a bare port (9464 or
// :9464) means loopback, so that turning metrics on never opens them to
// the network by accident; any interface must be named (0.0.0.0:9464).
func metricsListen(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	if !strings.Contains(v, ":") {
		v = ":" + v
	}
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return "", fmt.Errorf("is not host:port")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("has no port number from 0 to 65535")
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}
