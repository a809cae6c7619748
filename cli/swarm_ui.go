package cli

import (
	"context"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/aimi-tools/swarm/board"
	"github.com/aimi-tools/swarm/daemon"
)

// newSwarmUICmd is `aimi swarm ui`: the live web board on loopback, in
// front of the daemon's socket.
func newSwarmUICmd(s Streams) *cobra.Command {
	var socket, listen string
	var noOpen bool
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "serve the live web board of every swarm on 127.0.0.1 and print its URL",
		Long: `Serve a web page that shows every swarm the daemon holds, live: each
container's status, progress, story, branch, pull request, story graph and
journal, with stop, resume, retry and cleanup.

The board listens on loopback only and talks to the daemon through its socket;
the URL it prints carries a secret token that the first visit turns into a
cookie. Anyone without that URL (another user of this machine who finds the
port) gets only a refusal. Ctrl-C stops the board; the swarms go on.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return swarmErr(runBoard(cmd.Context(), s, socket, listen, !noOpen))
		},
	}
	cmd.Flags().StringVar(&socket, "socket", "", "daemon socket (default $AIMI_SOCKET, $XDG_RUNTIME_DIR/aimi/aimid.sock or /run/aimi/aimid.sock)")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "loopback address and port to serve on (port 0: any free port)")
	cmd.Flags().BoolVar(&noOpen, "no-open", false, "only print the URL; do not open a browser")
	return cmd
}

func runBoard(ctx context.Context, s Streams, socket, listen string, open bool) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return exitf(ExitUsage, "--listen %q: %v; give host:port, e.g. 127.0.0.1:8420", listen, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return exitf(ExitUsage, "--listen %q: the board serves on a loopback address only (127.0.0.1 or ::1)", listen)
	}
	client := daemon.NewClient(socket)
	defer client.Close()
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = client.Health(hctx)
	cancel()
	if err != nil {
		return err
	}
	token, err := board.NewToken()
	if err != nil {
		return fmt.Errorf("make the board's token: %w", err)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return exitf(ExitUsage, "listen on %s: %v; choose another port with --listen", listen, err)
	}
	addr := ln.Addr().String()
	srv, err := board.New(board.Options{Daemon: client, Token: token, Addr: addr, Logger: slog.New(slog.NewTextHandler(s.Err, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		ln.Close()
		return err
	}
	u := "http://" + addr + "/?" + url.Values{board.TokenParam: {token}}.Encode()
	fmt.Fprintf(s.Out, "board: %s\n", u)
	fmt.Fprintln(s.Out, "open it in a browser on this machine; keep the URL to yourself (it is the key). Ctrl-C stops the board.")
	if open {
		openBrowser(ctx, s, u)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("board: %w", err)
	case <-ctx.Done():
	}
	srv.Close()
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer scancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("board: stop: %w", err)
	}
	return nil
}

// openBrowser opens the board with xdg-open when a desktop session is at
// hand. The token must not appear on a command line (other users can read
// every process's arguments), so the browser is handed a private file that
// redirects to the URL; the file goes when the board stops.
func openBrowser(ctx context.Context, s Streams, u string) {
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return
	}
	opener, err := exec.LookPath("xdg-open")
	if err != nil {
		return
	}
	dir, err := os.MkdirTemp("", "aimi-board-") // 0700
	if err != nil {
		return
	}
	go func() { <-ctx.Done(); os.RemoveAll(dir) }()
	page := filepath.Join(dir, "board.html")
	body := `<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=` + html.EscapeString(u) + `"><title>aimi swarm board</title>`
	if err := os.WriteFile(page, []byte(body), 0o600); err != nil {
		return
	}
	cmd := exec.Command(opener, page)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(s.Err, "could not open a browser (%v); open the URL above yourself\n", err)
		return
	}
	go func() { _ = cmd.Wait() }()
}
