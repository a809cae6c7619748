package sandboximage

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/internal/atomicfile"
)

// defaultKeyring is Debian's archive keyring as the debian-archive-keyring
// package installs it; used for a source that names no Signed-By.
const defaultKeyring = "/usr/share/keyrings/debian-archive-keyring.gpg"

// MirrorEnv overrides the Debian mirror discovered from the host's apt
// sources (e.g. "http://mirror.example/debian"); the security suite then
// comes from SecurityMirrorEnv or is left out.
const (
	MirrorEnv         = "AIMI_DEBIAN_MIRROR"
	SecurityMirrorEnv = "AIMI_DEBIAN_SECURITY_MIRROR"
)

// aptSource is one "deb" line we hand to apt.
type aptSource struct {
	URI     string
	Suite   string
	Keyring string
}

func (s aptSource) line() string {
	return fmt.Sprintf("deb [signed-by=%s] %s %s main\n", s.Keyring, s.URI, s.Suite)
}

// discoverSources finds, in the host's apt configuration, the mirrors that
// serve release, release-updates and release-security: the machine already
// knows how to reach Debian (a local mirror, a proxy, a snapshot), and we use
// that rather than a host name of our own. Other sources on the host
// (third-party repositories) are left out.
func discoverSources(etcApt, release string) ([]aptSource, error) {
	if m := os.Getenv(MirrorEnv); m != "" {
		src := []aptSource{{URI: m, Suite: release, Keyring: defaultKeyring}, {URI: m, Suite: release + "-updates", Keyring: defaultKeyring}}
		if s := os.Getenv(SecurityMirrorEnv); s != "" {
			src = append(src, aptSource{URI: s, Suite: release + "-security", Keyring: defaultKeyring})
		}
		return src, nil
	}
	files := []string{filepath.Join(etcApt, "sources.list")}
	for _, pat := range []string{"*.list", "*.sources"} {
		m, _ := filepath.Glob(filepath.Join(etcApt, "sources.list.d", pat))
		files = append(files, m...)
	}
	want := map[string]bool{release: true, release + "-updates": true, release + "-security": true}
	seen := map[string]bool{}
	var out []aptSource
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // a missing sources.list is normal with deb822 sources
		}
		var found []aptSource
		if strings.HasSuffix(f, ".sources") {
			found = parseDeb822(data)
		} else {
			found = parseOneLine(data)
		}
		for _, s := range found {
			if !want[s.Suite] || seen[s.Suite] {
				continue
			}
			if s.Keyring == "" {
				s.Keyring = defaultKeyring
			}
			seen[s.Suite] = true
			out = append(out, s)
		}
	}
	if !seen[release] {
		return nil, fmt.Errorf("no apt source for Debian %q found in %s/sources.list*: set %s to a Debian mirror URL (e.g. the one your machine's apt uses)", release, etcApt, MirrorEnv)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Suite < out[j].Suite })
	return out, nil
}

// parseOneLine reads the classic "deb [opts] uri suite comp..." format.
func parseOneLine(data []byte) []aptSource {
	var out []aptSource
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		var keyring string
		f = f[1:]
		if strings.HasPrefix(f[0], "[") {
			for len(f) > 0 {
				opt := strings.Trim(f[0], "[]")
				if k, ok := strings.CutPrefix(opt, "signed-by="); ok {
					keyring = k
				}
				end := strings.HasSuffix(f[0], "]")
				f = f[1:]
				if end {
					break
				}
			}
		}
		if len(f) < 3 || !contains(f[2:], "main") {
			continue
		}
		out = append(out, aptSource{URI: f[0], Suite: f[1], Keyring: keyring})
	}
	return out
}

// parseDeb822 reads the "Types: / URIs: / Suites:" stanza format.
func parseDeb822(data []byte) []aptSource {
	var out []aptSource
	for _, stanza := range strings.Split(strings.ReplaceAll(string(data), "\r", ""), "\n\n") {
		fields := map[string]string{}
		for _, line := range strings.Split(stanza, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			k, v, ok := strings.Cut(line, ":")
			if !ok || strings.HasPrefix(line, " ") {
				continue
			}
			fields[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
		}
		if !contains(strings.Fields(fields["types"]), "deb") || !contains(strings.Fields(fields["components"]), "main") {
			continue
		}
		if strings.EqualFold(fields["enabled"], "no") {
			continue
		}
		keyring := fields["signed-by"]
		if strings.Contains(keyring, "\n") || strings.HasPrefix(keyring, "-----") {
			keyring = "" // an inline key: fall back to the archive keyring file
		}
		for _, uri := range strings.Fields(fields["uris"]) {
			for _, suite := range strings.Fields(fields["suites"]) {
				out = append(out, aptSource{URI: uri, Suite: suite, Keyring: keyring})
			}
		}
	}
	return out
}

func contains(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}

// buildRootfs downloads the packages and their dependency closure with
// apt-get into a private apt state under work (never touching the host's
// package database or lists), unpacks every .deb's filesystem tar with
// dpkg-deb and merges them into one rootfs tar at dst. Needs apt-get,
// dpkg-deb and the Debian archive keyring: on a Debian or Ubuntu host, all
// there by default.
func buildRootfs(ctx context.Context, log *slog.Logger, work, dst string, cfg rootfsConfig) error {
	sources, err := hostSources(cfg)
	if err != nil {
		return err
	}
	apt, err := newAptWork(work, cfg.Arch, sources)
	if err != nil {
		return err
	}
	start := time.Now()
	debs, err := apt.download(ctx, cfg.Packages)
	if err != nil {
		return err
	}
	log.Info("sandbox rootfs: packages downloaded", "count", len(debs), "took", time.Since(start).Round(time.Millisecond))

	// 0644: the tarball holds nothing secret and other users of the
	// machine may share the cache.
	var dupes []string
	err = atomicfile.Write(dst, 0o644, func(w io.Writer) error {
		var werr error
		dupes, werr = writeRootfs(ctx, w, debs, cfg)
		return werr
	})
	if err != nil {
		return fmt.Errorf("build the rootfs tar %s: %w", dst, err)
	}
	if len(dupes) > 0 {
		log.Debug("sandbox rootfs: paths shipped twice, first kept", "paths", dupes)
	}
	log.Info("sandbox rootfs: built", "path", dst, "packages", len(debs), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// hostSources checks the host has the tools, and returns the apt sources
// of cfg's release with their keyrings present.
func hostSources(cfg rootfsConfig) ([]aptSource, error) {
	for _, tool := range []string{"apt-get", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("building the sandbox rootfs needs %s (a Debian or Ubuntu host): %w; with a registry, build deploy/Dockerfile.sandbox instead", tool, err)
		}
	}
	sources, err := discoverSources(cfg.EtcApt, cfg.Release)
	if err != nil {
		return nil, err
	}
	for _, s := range sources {
		if _, err := os.Stat(s.Keyring); err != nil {
			return nil, fmt.Errorf("apt keyring %s for %s %s: %w (install it: apt-get install debian-archive-keyring)", s.Keyring, s.URI, s.Suite, err)
		}
	}
	return sources, nil
}

// aptWork is a private apt state: the options that point apt-get at it,
// the sources it reads and the directory it downloads into.
type aptWork struct {
	opts     []string
	sources  string // the sources.list content, for errors
	archives string
}

// newAptWork lays out a private apt state under work for sources.
func newAptWork(work, arch string, sources []aptSource) (aptWork, error) {
	dirs := map[string]string{}
	for _, d := range []string{"state/lists/partial", "cache/archives/partial", "etc/parts", "etc/prefs"} {
		p := filepath.Join(work, d)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return aptWork{}, fmt.Errorf("make apt work dir: %w", err)
		}
		dirs[d] = p
	}
	var list strings.Builder
	for _, s := range sources {
		list.WriteString(s.line())
	}
	sourceList := filepath.Join(work, "etc", "sources.list")
	status := filepath.Join(work, "state", "status")
	if err := os.WriteFile(sourceList, []byte(list.String()), 0o644); err != nil {
		return aptWork{}, fmt.Errorf("write apt sources: %w", err)
	}
	if err := os.WriteFile(status, nil, 0o644); err != nil {
		return aptWork{}, fmt.Errorf("write empty dpkg status: %w", err)
	}
	archives := filepath.Join(work, "cache", "archives")
	// Every path apt would read or write is redirected into work: the
	// host's dpkg database stays untouched and the empty status file makes
	// apt resolve the full dependency closure as for an empty system.
	opts := []string{
		"-o", "Dir::Etc::SourceList=" + sourceList,
		"-o", "Dir::Etc::SourceParts=" + dirs["etc/parts"],
		"-o", "Dir::Etc::Preferences=" + filepath.Join(dirs["etc/prefs"], "none"),
		"-o", "Dir::Etc::PreferencesParts=" + dirs["etc/prefs"],
		"-o", "Dir::State=" + filepath.Join(work, "state"),
		"-o", "Dir::State::Lists=" + filepath.Join(work, "state", "lists"),
		"-o", "Dir::State::status=" + status,
		"-o", "Dir::Cache=" + filepath.Join(work, "cache"),
		"-o", "Dir::Cache::archives=" + archives,
		"-o", "Debug::NoLocking=1",
		"-o", "APT::Architecture=" + arch,
		"-o", "APT::Architectures=" + arch,
		"-o", "Acquire::Languages=none",
		"-o", "APT::Install-Recommends=false",
		"-o", "APT::Install-Suggests=false",
		// Downloads as root into a root-owned private dir; apt's _apt
		// sandbox user could not write there.
		"-o", "APT::Sandbox::User=root",
		"-q",
	}
	return aptWork{opts: opts, sources: list.String(), archives: archives}, nil
}

// download fetches packages and their dependency closure and returns the
// .deb files, sorted.
func (a aptWork) download(ctx context.Context, packages []string) ([]string, error) {
	if err := runLogged(ctx, "apt-get", append(append([]string{}, a.opts...), "update")...); err != nil {
		return nil, fmt.Errorf("apt-get update for the sandbox rootfs (sources: %s): %w", strings.TrimSpace(a.sources), err)
	}
	args := append(append([]string{}, a.opts...), "install", "-y", "--download-only")
	args = append(args, packages...)
	if err := runLogged(ctx, "apt-get", args...); err != nil {
		return nil, fmt.Errorf("apt-get download of %s: %w", strings.Join(packages, " "), err)
	}
	debs, err := filepath.Glob(filepath.Join(a.archives, "*.deb"))
	if err != nil || len(debs) == 0 {
		return nil, fmt.Errorf("apt-get downloaded no packages into %s", a.archives)
	}
	sort.Strings(debs)
	return debs, nil
}

// writeRootfs writes the rootfs tar of debs and cfg to w and returns the
// paths more than one package shipped.
func writeRootfs(ctx context.Context, w io.Writer, debs []string, cfg rootfsConfig) ([]string, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	m := newRootfsMerger(bw, time.Now().UTC().Truncate(time.Second))
	if err := m.skeleton(cfg.User, cfg.Workspace); err != nil {
		return nil, err
	}
	for _, deb := range debs {
		if err := unpackDeb(ctx, deb, m); err != nil {
			return nil, err
		}
	}
	for _, l := range cfg.Links {
		name, err := cleanName(l.Path)
		if err != nil || name == "" {
			return nil, fmt.Errorf("rootfs link %q: bad path", l.Path)
		}
		if err := m.write(&tar.Header{Typeflag: tar.TypeSymlink, Name: usrMerged(name), Linkname: l.Target, Mode: 0o777}, nil); err != nil {
			return nil, err
		}
	}
	if err := m.finish(cfg.User, cfg.Release, cfg.Packages); err != nil {
		return nil, err
	}
	if len(m.certs) == 0 && contains(cfg.Packages, "ca-certificates") {
		return nil, fmt.Errorf("no certificates found under /%s in the ca-certificates package: the package layout changed; update the sandbox image builder", caCertDir)
	}
	if err := bw.Flush(); err != nil {
		return nil, fmt.Errorf("write rootfs tar: %w", err)
	}
	return m.dupes, nil
}

// unpackDeb streams one package's filesystem tar into the merger.
func unpackDeb(ctx context.Context, deb string, m *rootfsMerger) error {
	cmd := exec.CommandContext(ctx, "dpkg-deb", "--fsys-tarfile", deb)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("dpkg-deb %s: %w", deb, err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("dpkg-deb %s: %w", deb, err)
	}
	name := filepath.Base(deb)
	if perr := m.addPackage(name, out); perr != nil {
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		return perr
	}
	// Drain anything after the tar's end marker so dpkg-deb does not die
	// of a broken pipe.
	_, _ = io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("dpkg-deb --fsys-tarfile %s: %w: %s", name, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// runLogged runs a command, keeping its output for the error message only.
func runLogged(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C")
	out, err := cmd.CombinedOutput()
	if err != nil {
		tail := string(out)
		if len(tail) > 4000 {
			tail = "..." + tail[len(tail)-4000:]
		}
		return fmt.Errorf("%w\n%s", err, strings.TrimSpace(tail))
	}
	return nil
}
