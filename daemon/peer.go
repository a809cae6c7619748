package daemon

import (
	"context"
	"net"
	"os/user"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/aimi-tools/swarm/api"
)

// peerContext names the user at the other end of an API connection (the
// socket's peer credentials: the kernel's word, not the client's), for
// what the daemon records of who did something (an inbox answer).
func peerContext(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return ctx
	}
	var cred *unix.Ucred
	_ = raw.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if err != nil || cred == nil {
		return ctx
	}
	who := "uid " + strconv.Itoa(int(cred.Uid))
	if u, err := user.LookupId(strconv.Itoa(int(cred.Uid))); err == nil {
		who = u.Username + ", " + who
	}
	return api.WithRequester(ctx, who)
}
