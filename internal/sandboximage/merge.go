package sandboximage

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"
)

// mergedUsrDirs are the top-level directories that Debian's merged-/usr layout
// turns into symlinks into /usr. debootstrap creates these links before it
// unpacks anything; since we unpack without debootstrap, the merger rewrites
// every entry under them to its /usr path and emits the links itself, so a
// file shipped as ./bin/dash and one shipped as ./usr/bin/git end up in the
// same real directory.
var mergedUsrDirs = map[string]bool{"bin": true, "sbin": true, "lib": true, "lib32": true, "lib64": true, "libx32": true}

// droppedTrees are removed from the rootfs: documentation, manuals and
// translations nobody reads inside a sandbox. Copyright files stay (the
// licences of what we redistribute).
var droppedTrees = []string{"usr/share/man/", "usr/share/info/", "usr/share/locale/", "usr/share/lintian/", "usr/share/doc-base/", "usr/share/bug/"}

// caCertDir is where the ca-certificates package ships the Mozilla bundle,
// one PEM file per certificate; update-ca-certificates (its postinst, which
// we never run) would concatenate them into caBundle.
const (
	caCertDir = "usr/share/ca-certificates/"
	caBundle  = "etc/ssl/certs/ca-certificates.crt"
)

// User is the sandbox's unprivileged account.
type User struct {
	Name string
	UID  int
	GID  int
	Home string // absolute, e.g. /home/aimi
}

// rootfsMerger writes one rootfs tar from the filesystem tars of several
// Debian packages (dpkg-deb --fsys-tarfile), as dpkg would lay them out but
// without running any maintainer script; the few things those scripts do that
// a sandbox needs (accounts, the CA bundle, merged /usr) it does itself.
type rootfsMerger struct {
	tw    *tar.Writer
	seen  map[string]byte // cleaned path (no leading ./ or /) -> type flag written
	certs map[string][]byte
	mtime time.Time
	// dupes counts entries skipped because an earlier package (or the
	// skeleton) already wrote that path; a diversion-free package set has
	// none besides shared directories.
	dupes []string
}

func newRootfsMerger(w io.Writer, mtime time.Time) *rootfsMerger {
	return &rootfsMerger{tw: tar.NewWriter(w), seen: map[string]byte{}, certs: map[string][]byte{}, mtime: mtime}
}

// skeleton writes the directories and links every rootfs needs before any
// package is unpacked: merged-/usr links, /tmp with the sticky bit, the
// user's home and the workspace owned by the user.
func (m *rootfsMerger) skeleton(u User, workspace string) error {
	dirs := []struct {
		name     string
		mode     int64
		uid, gid int
	}{
		{"usr", 0o755, 0, 0}, {"usr/bin", 0o755, 0, 0}, {"usr/sbin", 0o755, 0, 0},
		{"usr/lib", 0o755, 0, 0}, {"usr/lib64", 0o755, 0, 0}, {"usr/local", 0o755, 0, 0},
		{"usr/local/bin", 0o755, 0, 0},
		{"etc", 0o755, 0, 0}, {"etc/ssl", 0o755, 0, 0}, {"etc/ssl/certs", 0o755, 0, 0},
		{"var", 0o755, 0, 0}, {"var/tmp", 0o1777, 0, 0}, {"run", 0o755, 0, 0},
		{"tmp", 0o1777, 0, 0}, {"root", 0o700, 0, 0}, {"proc", 0o555, 0, 0},
		{"sys", 0o555, 0, 0}, {"dev", 0o755, 0, 0}, {"home", 0o755, 0, 0},
		{strings.TrimPrefix(u.Home, "/"), 0o755, u.UID, u.GID},
		{strings.TrimPrefix(workspace, "/"), 0o755, u.UID, u.GID},
	}
	for _, d := range dirs {
		if err := m.dir(d.name, d.mode, d.uid, d.gid); err != nil {
			return err
		}
	}
	for _, l := range []string{"bin", "sbin", "lib", "lib64"} {
		if err := m.write(&tar.Header{Typeflag: tar.TypeSymlink, Name: l, Linkname: "usr/" + l, Mode: 0o777}, nil); err != nil {
			return err
		}
	}
	return nil
}

// addPackage copies one package's filesystem tar into the rootfs.
func (m *rootfsMerger) addPackage(pkg string, r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read filesystem tar of %s: %w", pkg, err)
		}
		orig, err := cleanName(hdr.Name)
		if err != nil {
			return fmt.Errorf("package %s: %w", pkg, err)
		}
		if orig == "" {
			continue // the package's "./" root entry
		}
		name := usrMerged(orig)
		if dropped(name) {
			continue
		}
		h := *hdr
		h.Name = name
		switch hdr.Typeflag {
		case tar.TypeLink:
			target, err := cleanName(hdr.Linkname)
			if err != nil {
				return fmt.Errorf("package %s: hard link %s: %w", pkg, orig, err)
			}
			h.Linkname = usrMerged(target)
		case tar.TypeSymlink:
			h.Linkname = symlinkTarget(orig, name, hdr.Linkname)
		}
		var body []byte
		if hdr.Typeflag == tar.TypeReg {
			// Only certificates are kept in memory (a few hundred KiB in
			// all); every other file is streamed.
			if strings.HasPrefix(name, caCertDir) && strings.HasSuffix(name, ".crt") {
				b, err := io.ReadAll(tr)
				if err != nil {
					return fmt.Errorf("package %s: read %s: %w", pkg, name, err)
				}
				m.certs[name] = b
				body = b
			}
		}
		if body != nil {
			if err := m.write(&h, bytes.NewReader(body)); err != nil {
				return err
			}
			continue
		}
		if err := m.write(&h, tr); err != nil {
			return fmt.Errorf("package %s: %w", pkg, err)
		}
	}
}

// finish writes the files maintainer scripts would have made (accounts, name
// service config, the CA bundle, a release note) and closes the tar.
func (m *rootfsMerger) finish(u User, release string, packages []string) error {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\n"+
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"+
		"%s:x:%d:%d:aimi sandbox:%s:/bin/sh\n", u.Name, u.UID, u.GID, u.Home)
	group := fmt.Sprintf("root:x:0:\nnogroup:x:65534:\n%s:x:%d:\n", u.Name, u.GID)
	files := []struct {
		name string
		mode int64
		data []byte
	}{
		{"etc/passwd", 0o644, []byte(passwd)},
		{"etc/group", 0o644, []byte(group)},
		{"etc/nsswitch.conf", 0o644, []byte("passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n")},
		{caBundle, 0o644, m.caBundle()},
		{"etc/aimi-sandbox-release", 0o644, []byte(fmt.Sprintf("release=%s\npackages=%s\n", release, strings.Join(packages, ",")))},
	}
	for _, f := range files {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data))}
		if err := m.write(h, bytes.NewReader(f.data)); err != nil {
			return err
		}
	}
	return m.tw.Close()
}

// caBundle concatenates the certificates in path order, each ending in a
// newline, as update-ca-certificates does.
func (m *rootfsMerger) caBundle() []byte {
	names := make([]string, 0, len(m.certs))
	for n := range m.certs {
		names = append(names, n)
	}
	sort.Strings(names)
	var b bytes.Buffer
	for _, n := range names {
		c := m.certs[n]
		b.Write(c)
		if len(c) > 0 && c[len(c)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

func (m *rootfsMerger) dir(name string, mode int64, uid, gid int) error {
	return m.write(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, Uid: uid, Gid: gid}, nil)
}

// write emits one entry after its parent directories; a path written before
// is skipped (first writer wins: the skeleton's modes and owners hold).
func (m *rootfsMerger) write(h *tar.Header, body io.Reader) error {
	name := strings.TrimSuffix(h.Name, "/")
	if _, ok := m.seen[name]; ok {
		if h.Typeflag != tar.TypeDir {
			m.dupes = append(m.dupes, name)
		}
		return nil
	}
	if parent := path.Dir(name); parent != "." {
		if _, ok := m.seen[parent]; !ok {
			if err := m.dir(parent, 0o755, 0, 0); err != nil {
				return err
			}
		}
	}
	out := &tar.Header{
		Typeflag: h.Typeflag, Name: name, Linkname: h.Linkname, Mode: h.Mode,
		Uid: h.Uid, Gid: h.Gid, Size: h.Size, ModTime: h.ModTime, Format: tar.FormatPAX,
	}
	if out.ModTime.IsZero() {
		out.ModTime = m.mtime
	}
	if out.Typeflag == tar.TypeDir {
		out.Name += "/"
	}
	if out.Typeflag != tar.TypeReg {
		out.Size = 0
	}
	if err := m.tw.WriteHeader(out); err != nil {
		return fmt.Errorf("write %s to rootfs tar: %w", name, err)
	}
	if out.Typeflag == tar.TypeReg && body != nil {
		if _, err := io.Copy(m.tw, body); err != nil {
			return fmt.Errorf("write %s to rootfs tar: %w", name, err)
		}
	}
	m.seen[name] = out.Typeflag
	return nil
}

// cleanName turns a tar entry name into a clean relative path ("" for the
// root). Cleaning it as an absolute path first means no ".." can climb
// above the rootfs; an empty or NUL-carrying name is refused.
func cleanName(n string) (string, error) {
	if n == "" || strings.ContainsRune(n, 0) {
		return "", fmt.Errorf("bad tar entry name %q", n)
	}
	return strings.TrimPrefix(path.Clean("/"+n), "/"), nil
}

// usrMerged maps bin/x, lib/x, ... to usr/bin/x, usr/lib/x, ...
func usrMerged(name string) string {
	first, _, _ := strings.Cut(name, "/")
	if mergedUsrDirs[first] {
		return "usr/" + name
	}
	return name
}

// symlinkTarget keeps absolute targets (the merged-/usr links make them
// resolve) and re-anchors relative ones whose link moved into /usr: the
// target is resolved from the link's original directory and written as an
// absolute path, which stays right wherever the link now lives.
func symlinkTarget(orig, name, target string) string {
	if path.IsAbs(target) || orig == name {
		return target
	}
	abs := path.Clean(path.Join("/", path.Dir(orig), target))
	return "/" + usrMerged(strings.TrimPrefix(abs, "/"))
}

func dropped(name string) bool {
	for _, t := range droppedTrees {
		if name+"/" == t || strings.HasPrefix(name, t) {
			return true
		}
	}
	// usr/share/doc/<pkg>/copyright stays, the rest of the docs go.
	if rest, ok := strings.CutPrefix(name, "usr/share/doc/"); ok {
		pkg, file, found := strings.Cut(rest, "/")
		return found && pkg != "" && file != "copyright"
	}
	return false
}
