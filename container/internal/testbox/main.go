// Command testbox is the scripted process the container package's tests run
// inside real containers. It is built as a static binary into a FROM scratch
// image by internal/dockertest, so it can rely on nothing but itself: no
// shell, no libc, no coreutils.
//
// The script comes from the environment variable TESTBOX_SCRIPT: steps
// separated by ';', each "verb" or "verb:argument", run in order:
//
//	line:TEXT      print TEXT on stdout
//	raw:TEXT       print TEXT on stdout without a newline
//	err:TEXT       print TEXT on stderr
//	lines:N        print N lines "line <i>" on stdout in one write burst; i
//	               counts on across lines steps (0, 1, 2, ...)
//	big:N          print one line of N bytes ('x' repeated) on stdout
//	wide:N         print N lines "wide <i> xxx..." of 1000 bytes on stdout
//	               as fast as the writes go; i counts from 0
//	errlines:N     print N lines "err <i>" on stderr in one write burst; i
//	               counts on across errlines steps
//	readstdin      read one line from stdin, print "stdin:" + the line
//	alloc          allocate and touch memory 1 MiB at a time until killed
//	sleep:DUR      sleep for a Go duration (e.g. 30s)
//	trap:N         on SIGTERM print "sigterm" and exit with code N
//	trap:ignore    on SIGTERM print "sigterm ignored" and carry on
//	listen:PORT    accept TCP connections on PORT in the background
//	connect:ADDR   dial ADDR (host:port) with a 3s timeout, print
//	               "connect ok" or "connect failed: <reason>"
//	exit:N         exit with code N
//
// After the last step it exits 0.
package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Getenv("TESTBOX_SCRIPT")); err != nil {
		fmt.Fprintln(os.Stderr, "testbox:", err)
		os.Exit(2)
	}
}

func run(script string) error {
	out := bufio.NewWriterSize(os.Stdout, 1<<20)
	b := &box{out: out, in: bufio.NewReader(os.Stdin)}
	// Flush after every step so output order across steps is the script's.
	defer out.Flush()
	for _, step := range strings.Split(script, ";") {
		if step == "" {
			continue
		}
		verb, arg, _ := strings.Cut(step, ":")
		if err := b.do(verb, arg); err != nil {
			return fmt.Errorf("step %q: %w", step, err)
		}
		if err := out.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// box is the script's state.
type box struct {
	out   *bufio.Writer
	lines int           // next number for lines steps
	errs  int           // next number for errlines steps
	in    *bufio.Reader // stdin, kept across readstdin steps
}

func (b *box) do(verb, arg string) error {
	switch verb {
	case "line":
		fmt.Fprintln(b.out, arg)
	case "raw":
		b.out.WriteString(arg)
	case "err":
		fmt.Fprintln(os.Stderr, arg)
	case "lines", "wide", "errlines", "big":
		n, err := strconv.Atoi(arg)
		if err != nil {
			return err
		}
		return b.burst(verb, n)
	case "write":
		// write:<path> reports whether the path is writable (read-only root
		// and scratch volume tests).
		if err := os.WriteFile(arg, []byte("x"), 0o644); err != nil {
			fmt.Fprintf(b.out, "write failed %s\n", arg)
		} else {
			fmt.Fprintf(b.out, "wrote %s\n", arg)
		}
	case "readstdin":
		line, err := b.in.ReadString('\n')
		if err != nil {
			return fmt.Errorf("read stdin: %w", err)
		}
		fmt.Fprintln(b.out, "stdin:"+strings.TrimSuffix(line, "\n"))
	case "alloc":
		alloc()
	case "sleep":
		d, err := time.ParseDuration(arg)
		if err != nil {
			return err
		}
		time.Sleep(d)
	case "trap":
		trap(arg)
	case "listen", "connect":
		return b.network(verb, arg)
	case "exit":
		code, err := strconv.Atoi(arg)
		if err != nil {
			return err
		}
		b.out.Flush()
		os.Exit(code)
	default:
		return fmt.Errorf("unknown verb %q", verb)
	}
	return nil
}

// burst runs the steps that print n lines (or one line of n bytes) at once.
func (b *box) burst(verb string, n int) error {
	out := b.out
	switch verb {
	case "lines":
		for range n {
			fmt.Fprintf(out, "line %d\n", b.lines)
			b.lines++
		}
	case "wide":
		for i := range n {
			head := fmt.Sprintf("wide %d ", i)
			out.WriteString(head + strings.Repeat("x", 999-len(head)) + "\n")
		}
	case "errlines":
		w := bufio.NewWriterSize(os.Stderr, 1<<20)
		for range n {
			fmt.Fprintf(w, "err %d\n", b.errs)
			b.errs++
		}
		return w.Flush()
	case "big":
		out.WriteString(strings.Repeat("x", n) + "\n")
	}
	return nil
}

// network runs listen:PORT and connect:ADDR.
func (b *box) network(verb, arg string) error {
	if verb == "connect" {
		c, err := net.DialTimeout("tcp", arg, 3*time.Second)
		if err != nil {
			fmt.Fprintln(b.out, "connect failed:", err)
			return nil
		}
		c.Close()
		fmt.Fprintln(b.out, "connect ok")
		return nil
	}
	l, err := net.Listen("tcp", ":"+arg)
	if err != nil {
		return err
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello\n"))
			c.Close()
		}
	}()
	fmt.Fprintln(b.out, "listening", arg)
	return nil
}

// alloc allocates and touches memory 1 MiB at a time until killed.
func alloc() {
	var keep [][]byte
	for {
		chunk := make([]byte, 1<<20)
		for i := 0; i < len(chunk); i += 4096 {
			chunk[i] = 1
		}
		//lint:ignore SA4010 the chunks are held, never read, to run the container out of memory
		keep = append(keep, chunk)
	}
}

// trap handles SIGTERM as trap:N or trap:ignore say.
func trap(arg string) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	go func() {
		for range sig {
			if arg == "ignore" {
				fmt.Println("sigterm ignored")
				continue
			}
			// The main loop flushes after every step, so nothing of
			// out is pending while a later step (sleep) runs.
			code, _ := strconv.Atoi(arg)
			fmt.Println("sigterm")
			os.Exit(code)
		}
	}()
}
