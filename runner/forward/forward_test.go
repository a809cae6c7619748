package forward

import (
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"testing"
)

func TestParse(t *testing.T) {
	fws, err := Parse("3128=proxy,40123=git", "/run/aimi/net")
	if err != nil || len(fws) != 2 || fws[0].Port != 3128 || fws[1].Socket != "/run/aimi/net/git.sock" {
		t.Fatalf("%+v %v", fws, err)
	}
	for _, bad := range []string{"x=git", "0=git", "3128=", "3128=../x", "3128=a,3128=b", "3128", "03128=a"} {
		if _, err := Parse(bad, "/d"); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestForwardCopiesToTheSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "echo.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	probe, _ := net.Listen("tcp", "127.0.0.1:0")
	port := probe.Addr().(*net.TCPAddr).Port
	_ = probe.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := Start(ctx, []Forward{{Port: port, Socket: sock}}, slog.Default()); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write([]byte("ping"))
	_ = c.(*net.TCPConn).CloseWrite()
	got, _ := io.ReadAll(c)
	if string(got) != "ping" {
		t.Fatalf("%q", got)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("3128=proxy,40123=git")
	f.Fuzz(func(t *testing.T, s string) {
		fws, err := Parse(s, "/d")
		if err != nil {
			return
		}
		for _, fw := range fws {
			if filepath.Dir(fw.Socket) != "/d" {
				t.Fatalf("%q escapes: %+v", s, fw)
			}
		}
	})
}
