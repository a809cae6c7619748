package sandboximage

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type entry struct {
	name, link string
	typ        byte
	body       string
}

func pkgTar(t *testing.T, entries ...entry) *bytes.Buffer {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body))}
		if e.typ == tar.TypeDir {
			h.Mode, h.Size = 0o755, 0
		}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &b
}

// readAll returns the merged tar as name -> header (+ body for files), and
// the order names appeared in.
func readAll(t *testing.T, r io.Reader) (map[string]*tar.Header, map[string]string, []string) {
	t.Helper()
	hdrs, bodies := map[string]*tar.Header{}, map[string]string{}
	var order []string
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return hdrs, bodies, order
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(h.Name, "/")
		if _, dup := hdrs[name]; dup {
			t.Errorf("path %s written twice", name)
		}
		hdrs[name] = h
		order = append(order, name)
		b, _ := io.ReadAll(tr)
		bodies[name] = string(b)
	}
}

func merged(t *testing.T, pkgs ...*bytes.Buffer) (map[string]*tar.Header, map[string]string, []string) {
	t.Helper()
	var out bytes.Buffer
	m := newRootfsMerger(&out, time.Unix(0, 0))
	if err := m.skeleton(DefaultUser, Workspace); err != nil {
		t.Fatal(err)
	}
	for i, p := range pkgs {
		if err := m.addPackage("pkg"+string(rune('a'+i)), p); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.finish(DefaultUser, "bookworm", []string{"git"}); err != nil {
		t.Fatal(err)
	}
	return readAll(t, &out)
}

// mergeCheck is one subtest of TestMergerLaysOutRootfsAsDpkgWould.
type mergeCheck struct {
	name  string
	check func(t *testing.T)
}

func TestMergerLaysOutRootfsAsDpkgWould(t *testing.T) {
	hdrs, bodies, order := merged(t, dpkgLikePackages(t)...)
	tests := append(mergeLayoutChecks(hdrs, bodies), mergeContentChecks(hdrs, bodies, order)...)
	for _, tc := range tests {
		t.Run(tc.name, tc.check)
	}
}

// dpkgLikePackages are three packages' data archives as dpkg would unpack
// them: dash, libc and the CA certificates.
func dpkgLikePackages(t *testing.T) []*bytes.Buffer {
	dash := pkgTar(t,
		entry{name: "./", typ: tar.TypeDir},
		entry{name: "./bin/", typ: tar.TypeDir},
		entry{name: "./bin/dash", typ: tar.TypeReg, body: "ELF dash"},
		entry{name: "./bin/sh", typ: tar.TypeSymlink, link: "dash"},
		entry{name: "./usr/share/doc/dash/copyright", typ: tar.TypeReg, body: "GPL"},
		entry{name: "./usr/share/doc/dash/changelog.gz", typ: tar.TypeReg, body: "log"},
		entry{name: "./usr/share/man/man1/dash.1.gz", typ: tar.TypeReg, body: "man"},
	)
	libc := pkgTar(t,
		entry{name: "./lib64/ld-linux-x86-64.so.2", typ: tar.TypeSymlink, link: "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"},
		entry{name: "./lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", typ: tar.TypeReg, body: "ld"},
		entry{name: "./lib/x86_64-linux-gnu/libc.so.6", typ: tar.TypeReg, body: "libc"},
		entry{name: "./sbin/ldconfig", typ: tar.TypeReg, body: "ldconfig"},
		entry{name: "./sbin/ldconfig.real", typ: tar.TypeLink, link: "./sbin/ldconfig"},
		entry{name: "./bin/rel", typ: tar.TypeSymlink, link: "../usr/bin/git"},
		entry{name: "./tmp/", typ: tar.TypeDir}, // skeleton's 1777 must win
	)
	certs := pkgTar(t,
		entry{name: "./usr/share/ca-certificates/mozilla/B.crt", typ: tar.TypeReg, body: "-----B-----"},
		entry{name: "./usr/share/ca-certificates/mozilla/A.crt", typ: tar.TypeReg, body: "-----A-----\n"},
	)
	return []*bytes.Buffer{dash, libc, certs}
}

// mergeLayoutChecks are the subtests of where the merged entries go: the
// merged /usr, moved files and links.
func mergeLayoutChecks(hdrs map[string]*tar.Header, bodies map[string]string) []mergeCheck {
	return []mergeCheck{
		{"top-level bin, sbin, lib, lib64 are links into /usr", func(t *testing.T) {
			for _, d := range []string{"bin", "sbin", "lib", "lib64"} {
				h := hdrs[d]
				if h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "usr/"+d {
					t.Errorf("%s: got %+v, want symlink to usr/%s", d, h, d)
				}
			}
		}},
		{"files under /bin and /lib move to /usr", func(t *testing.T) {
			for _, p := range []string{"usr/bin/dash", "usr/lib/x86_64-linux-gnu/libc.so.6", "usr/sbin/ldconfig"} {
				if hdrs[p] == nil {
					t.Errorf("%s missing", p)
				}
			}
			if bodies["usr/bin/dash"] != "ELF dash" {
				t.Errorf("dash body %q", bodies["usr/bin/dash"])
			}
		}},
		{"relative symlink of a moved link points to the same file from /usr", func(t *testing.T) {
			if h := hdrs["usr/bin/sh"]; h == nil || h.Linkname != "/usr/bin/dash" {
				t.Errorf("sh: %+v", h)
			}
		}},
		{"relative symlink climbing out of a moved dir is re-anchored", func(t *testing.T) {
			if h := hdrs["usr/bin/rel"]; h == nil || h.Linkname != "/usr/bin/git" {
				t.Errorf("rel: %+v", h)
			}
		}},
		{"absolute symlink is kept", func(t *testing.T) {
			if h := hdrs["usr/lib64/ld-linux-x86-64.so.2"]; h == nil || h.Linkname != "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" {
				t.Errorf("ld.so link: %+v", h)
			}
		}},
		{"hard link target follows the move", func(t *testing.T) {
			if h := hdrs["usr/sbin/ldconfig.real"]; h == nil || h.Typeflag != tar.TypeLink || h.Linkname != "usr/sbin/ldconfig" {
				t.Errorf("hard link: %+v", h)
			}
		}},
	}
}

// mergeContentChecks are the subtests of what is dropped, modes, owners,
// order and the generated files.
func mergeContentChecks(hdrs map[string]*tar.Header, bodies map[string]string, order []string) []mergeCheck {
	return []mergeCheck{
		{"docs and manuals dropped, copyright kept", func(t *testing.T) {
			if hdrs["usr/share/doc/dash/copyright"] == nil {
				t.Error("copyright dropped")
			}
			for _, p := range []string{"usr/share/doc/dash/changelog.gz", "usr/share/man/man1/dash.1.gz", "usr/share/man"} {
				if hdrs[p] != nil {
					t.Errorf("%s kept", p)
				}
			}
		}},
		{"skeleton modes win over packages", func(t *testing.T) {
			if h := hdrs["tmp"]; h == nil || h.Mode != 0o1777 {
				t.Errorf("tmp: %+v", h)
			}
		}},
		{"home and workspace belong to the user", func(t *testing.T) {
			for _, p := range []string{"home/aimi", "workspace"} {
				if h := hdrs[p]; h == nil || h.Uid != DefaultUser.UID || h.Gid != DefaultUser.GID {
					t.Errorf("%s: %+v", p, h)
				}
			}
		}},
		{"every parent directory precedes its entries", func(t *testing.T) {
			pos := map[string]int{}
			for i, n := range order {
				pos[n] = i
			}
			for i, n := range order {
				if p := filepath.Dir(n); p != "." {
					if j, ok := pos[p]; !ok || j > i {
						t.Errorf("%s at %d before its parent %s (%d, %t)", n, i, p, j, ok)
					}
				}
			}
		}},
		{"CA bundle concatenates the certificates in path order", func(t *testing.T) {
			if got, want := bodies[caBundle], "-----A-----\n-----B-----\n"; got != want {
				t.Errorf("bundle %q, want %q", got, want)
			}
		}},
		{"accounts name root and the sandbox user", func(t *testing.T) {
			if !strings.Contains(bodies["etc/passwd"], "aimi:x:1000:1000:aimi sandbox:/home/aimi:/bin/sh\n") {
				t.Errorf("passwd: %q", bodies["etc/passwd"])
			}
			if !strings.Contains(bodies["etc/group"], "aimi:x:1000:\n") {
				t.Errorf("group: %q", bodies["etc/group"])
			}
		}},
	}
}

func TestMergerKeepsFirstOfDuplicatePaths(t *testing.T) {
	a := pkgTar(t, entry{name: "./usr/bin/x", typ: tar.TypeReg, body: "first"})
	b := pkgTar(t, entry{name: "./bin/x", typ: tar.TypeReg, body: "second"})
	_, bodies, _ := merged(t, a, b)
	if bodies["usr/bin/x"] != "first" {
		t.Errorf("got %q, want first", bodies["usr/bin/x"])
	}
}

func TestCleanNameCannotClimbAboveRoot(t *testing.T) {
	tests := []struct{ in, want string }{
		{"./", ""},
		{"./usr/bin/git", "usr/bin/git"},
		{"/etc/passwd", "etc/passwd"},
		{"../../etc/shadow", "etc/shadow"},
		{"usr/../../x", "x"},
	}
	for _, tc := range tests {
		got, err := cleanName(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("cleanName(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := cleanName("a\x00b"); err == nil {
		t.Error("NUL in a name accepted")
	}
}

func TestDiscoverSourcesReadsBothFormatsAndSkipsOthers(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  []string // "uri suite keyring"
		fail  bool
	}{
		{
			name: "deb822 with several suites, third-party source left out",
			files: map[string]string{
				"sources.list.d/debian.sources": "Types: deb\n# comment\nURIs: http://mirror.test/debian\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /k.gpg\n\nTypes: deb\nURIs: http://mirror.test/debian-security\nSuites: bookworm-security\nComponents: main\nSigned-By: /k.gpg\n",
				"sources.list.d/node.sources":   "Types: deb\nURIs: https://other.test/node\nSuites: nodistro\nComponents: main\n",
			},
			want: []string{"http://mirror.test/debian bookworm /k.gpg", "http://mirror.test/debian-security bookworm-security /k.gpg", "http://mirror.test/debian bookworm-updates /k.gpg"},
		},
		{
			name:  "one-line format with options and comments",
			files: map[string]string{"sources.list": "# deb http://x.test/debian bookworm main\ndeb [arch=amd64 signed-by=/s.gpg] http://y.test/debian bookworm main contrib\ndeb-src http://y.test/debian bookworm main\n"},
			want:  []string{"http://y.test/debian bookworm /s.gpg"},
		},
		{
			name:  "no keyring named: the archive keyring",
			files: map[string]string{"sources.list": "deb http://y.test/debian bookworm main\n"},
			want:  []string{"http://y.test/debian bookworm " + defaultKeyring},
		},
		{
			name:  "no source for the release is an error naming the override",
			files: map[string]string{"sources.list": "deb http://y.test/debian trixie main\n"},
			fail:  true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(MirrorEnv, "")
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, "sources.list.d"), 0o755); err != nil {
				t.Fatal(err)
			}
			for n, c := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := discoverSources(dir, "bookworm")
			if tc.fail {
				if err == nil || !strings.Contains(err.Error(), MirrorEnv) {
					t.Fatalf("err = %v, want one naming %s", err, MirrorEnv)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var gs []string
			for _, s := range got {
				gs = append(gs, s.URI+" "+s.Suite+" "+s.Keyring)
			}
			if strings.Join(gs, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(gs, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestContentKeyChangesWithEveryInput(t *testing.T) {
	base := contentKey("r", []byte{1}, finalConfig(nil, map[string]string{"a": "1"}))
	if again := contentKey("r", []byte{1}, finalConfig(nil, map[string]string{"a": "1"})); again != base {
		t.Fatal("content key not stable")
	}
	for name, k := range map[string]string{
		"rootfs": contentKey("s", []byte{1}, finalConfig(nil, map[string]string{"a": "1"})),
		"runner": contentKey("r", []byte{2}, finalConfig(nil, map[string]string{"a": "1"})),
		"env":    contentKey("r", []byte{1}, finalConfig([]string{"X=1"}, map[string]string{"a": "1"})),
		"labels": contentKey("r", []byte{1}, finalConfig(nil, map[string]string{"a": "2"})),
	} {
		if k == base {
			t.Errorf("changing the %s left the key unchanged", name)
		}
	}
}

// FuzzAddPackage feeds arbitrary bytes as a package's filesystem tar: the
// merger must not panic, and whatever it writes must stay a valid tar whose
// paths are clean, relative and unique, each after its parent.
func FuzzAddPackage(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var out bytes.Buffer
		m := newRootfsMerger(&out, time.Unix(0, 0))
		if err := m.skeleton(DefaultUser, Workspace); err != nil {
			t.Fatal(err)
		}
		_ = m.addPackage("fuzz", bytes.NewReader(data)) // errors are fine, panics are not
		if err := m.finish(DefaultUser, "bookworm", nil); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		tr := tar.NewReader(&out)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				t.Fatalf("merged tar unreadable: %v", err)
			}
			name := strings.TrimSuffix(h.Name, "/")
			if name == "" || strings.HasPrefix(name, "/") || name != filepath.Clean(name) || strings.HasPrefix(name, "..") {
				t.Fatalf("unclean path %q", h.Name)
			}
			if seen[name] {
				t.Fatalf("path %q written twice", name)
			}
			if p := filepath.Dir(name); p != "." && !seen[p] {
				t.Fatalf("%q before its parent", name)
			}
			seen[name] = true
		}
	})
}
