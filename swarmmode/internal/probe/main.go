// Command probe stands in for acp-runner in the swarmmode tests: it takes
// its task-request and environment the way the runner does (a file named by
// contract.EnvTaskRequestFile, secrets listed in contract.EnvSecretEnv) and does
// what the request says: print lines, listen, dial, sleep, exit with a code.
// Run with net-relay, it stands in for a sandbox's relay.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/runner"
)

// banner is what a listener says to every connection.
const banner = "aimi-probe\n"

type request struct {
	Lines  int    `json:"lines"`
	Exit   int    `json:"exit"`
	Sleep  string `json:"sleep"`
	Listen string `json:"listen"` // address to accept on while sleeping
	Dial   string `json:"dial"`   // address to try
	Tries  int    `json:"tries"`  // dial attempts a second apart until one succeeds (default 1)
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "net-relay" {
		relay()
	}
	if err := runner.LoadSecretEnv(os.Getenv, os.Setenv, contract.SecretDir); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(2)
	}
	line, err := requestLine()
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(2)
	}
	fmt.Println("request " + line)
	fmt.Println("secret " + os.Getenv("PROBE_SECRET"))
	var req request
	if err := json.Unmarshal([]byte(line), &req); err != nil {
		fmt.Fprintln(os.Stderr, "probe: bad request:", err)
		os.Exit(2)
	}
	for i := 0; i < req.Lines; i++ {
		fmt.Printf("line %d\n", i)
	}
	if req.Listen != "" {
		listen(req.Listen)
	}
	if req.Dial != "" {
		if dial(req.Dial, max(req.Tries, 1)) {
			fmt.Println("dial ok")
		} else {
			fmt.Println("dial failed")
		}
	}
	if req.Sleep != "" {
		d, _ := time.ParseDuration(req.Sleep)
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM)
		select {
		case <-sig:
			fmt.Println("terminated")
			os.Exit(3)
		case <-time.After(d):
		}
	}
	fmt.Println("done")
	os.Exit(req.Exit)
}

// requestLine returns the first line of the task-request.
func requestLine() (string, error) {
	var b []byte
	if r := os.Getenv("PROBE_REQUEST"); r != "" {
		b = []byte(r) // a task made by hand, without the engine's config
	} else {
		in, err := runner.RequestInput(os.Getenv, os.Stdin)
		if err != nil {
			return "", err
		}
		b, _ = io.ReadAll(io.LimitReader(in, 64<<10))
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return line, nil
}

// listen accepts on addr in the background, saying banner to every
// connection.
func listen(addr string) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Println("listen failed", err)
		os.Exit(2)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(banner))
			c.Close()
		}
	}()
	fmt.Println("listening")
}

// dial reports whether one of tries attempts a second apart reached a
// listener. Only the banner counts: a network that accepts every connection
// (a transparent proxy on the way out) must not pass for reaching the
// listener.
func dial(addr string, tries int) bool {
	for i := 0; i < tries; i++ {
		if i > 0 {
			time.Sleep(time.Second)
		}
		if c, err := net.DialTimeout("tcp", addr, 3*time.Second); err == nil {
			_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
			b, _ := io.ReadAll(io.LimitReader(c, int64(len(banner))))
			c.Close()
			if string(b) == banner {
				return true
			}
		}
	}
	return false
}

// relay stands in for acp-runner net-relay (the engine runs the image's
// program with that argument as a sandbox's relay): it runs until SIGTERM.
func relay() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	fmt.Println("relaying")
	<-sig
	os.Exit(0)
}
