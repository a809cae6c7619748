package cli

import (
	"context"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net"
	"net/http"
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
	var socket, listen, repoFlag string
	var noOpen bool
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "serve the live web board of every swarm on 127.0.0.1 and print its URL",
		Long: `Serve a web page that shows every swarm the daemon holds, live: each
container's status, progress, story, branch, pull request, story graph and
journal, with stop, resume, retry and cleanup.

The board listens on loopback only and talks to the daemon through its socket;
the URL it prints carries a secret token (in its fragment, which the browser
never sends) that the page keeps in its tab and sends in a header; there is no
cookie. Anyone without that URL (another user of this machine who finds the
port, or runs a server on another port) gets only a refusal. Connections are
bounded; a flood of idle ones cannot lock you out. Ctrl-C stops the board; the
swarms go on.

With --repo the board shows and acts on that repository's swarm only;
without it, every swarm the daemon holds.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			repo := ""
			if cmd.Flags().Changed("repo") {
				r, err := swarmRepoRoot(repoFlag)
				if err != nil {
					return err
				}
				repo = r
			}
			return swarmErr(runBoard(cmd.Context(), s, boardFlags{socket: socket, listen: listen, repo: repo, open: !noOpen}))
		},
	}
	cmd.Flags().StringVar(&repoFlag, "repo", "", "show and act on this repository's swarm only (default: every swarm the daemon holds)")
	cmd.Flags().StringVar(&socket, "socket", "", "daemon socket (default $AIMI_SOCKET, $XDG_RUNTIME_DIR/aimi/aimid.sock or /run/aimi/aimid.sock)")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "loopback address and port to serve on (port 0: any free port)")
	cmd.Flags().BoolVar(&noOpen, "no-open", false, "only print the URL; do not open a browser")
	return cmd
}

// boardFlags are the flags of `aimi swarm ui`.
type boardFlags struct {
	socket, listen string
	repo           string // "" every swarm
	open           bool
}

func runBoard(ctx context.Context, s Streams, f boardFlags) error {
	listen := f.listen
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return exitf(ExitUsage, "--listen %q: %v; give host:port, e.g. 127.0.0.1:8420", listen, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return exitf(ExitUsage, "--listen %q: the board serves on a loopback address only (127.0.0.1 or ::1)", listen)
	}
	client := daemon.NewClient(f.socket)
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
	srv, err := board.New(board.Options{Daemon: client, Token: token, Addr: addr, Repo: f.repo, Logger: slog.New(slog.NewTextHandler(s.Err, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		ln.Close()
		return err
	}
	u := board.URL(addr, token)
	fmt.Fprintf(s.Out, "board: %s\n", u)
	fmt.Fprintln(s.Out, "open it in a browser on this machine; keep the URL to yourself (it is the key). Ctrl-C stops the board.")
	if f.repo != "" {
		fmt.Fprintf(s.Out, "showing only the swarm of %s\n", f.repo)
	}
	if f.open {
		openBrowser(ctx, s, u)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("board: %w", err)
	case <-ctx.Done():
	}
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
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
