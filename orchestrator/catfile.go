package orchestrator

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"

	"github.com/aimi-tools/swarm/gitref"
	"github.com/aimi-tools/swarm/internal/gitcmd"
)

// maxAnswerHeader bounds a header line of git cat-file: an object id, a
// type and a size, or a query (a revision and a path) and "missing".
const maxAnswerHeader = 64 << 10

// catFile is a git cat-file in batch mode, started before its queries are
// known: its start (a few ms on a loaded machine) then overlaps the work
// that finds them.
type catFile struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    io.ReadCloser
	stderr bytes.Buffer
	cancel context.CancelFunc
}

// startCatFile starts git cat-file in repo with batch (--batch-check=FORMAT
// or --batch=FORMAT). Its answer must be asked for, with no queries if
// none remain, to end it.
func startCatFile(ctx context.Context, repo, batch string) (*catFile, error) {
	ctx, cancel := context.WithTimeout(ctx, gitReadTimeout)
	c := &catFile{cmd: gitcmd.Git{}.Command(ctx, repo, "cat-file", batch, "--buffer"), cancel: cancel}
	var err error
	if c.in, err = c.cmd.StdinPipe(); err == nil {
		c.out, err = c.cmd.StdoutPipe()
	}
	c.cmd.Stderr = &c.stderr
	if err == nil {
		err = c.cmd.Start()
	}
	if err != nil {
		cancel()
		return nil, fmt.Errorf("run git: %w", err)
	}
	return c, nil
}

// answer writes c the queries, one a line (none may hold a line break),
// hands each answer's header line to read, which consumes from r whatever
// content follows the header, and waits for git to end. An error of read
// stops git.
func (c *catFile) answer(queries []string, read func(q, header string, r *bufio.Reader) error) error {
	defer c.cancel()
	// Written beside the reading: git answers while it reads, and would
	// block on a full pipe that nobody drains.
	written := make(chan error, 1)
	go func() {
		var err error
		if len(queries) > 0 {
			_, err = io.WriteString(c.in, strings.Join(queries, "\n")+"\n")
		}
		if cerr := c.in.Close(); err == nil {
			err = cerr
		}
		written <- err
	}()
	rerr := readAnswers(bufio.NewReaderSize(c.out, maxAnswerHeader), queries, read)
	if rerr != nil {
		c.cmd.Process.Kill()
	}
	werr := <-written
	if err := c.cmd.Wait(); err != nil && (rerr == nil || c.stderr.Len() > 0) {
		return fmt.Errorf("git cat-file: %w: %s", err, cutText(strings.TrimSpace(c.stderr.String()), 300))
	}
	if rerr != nil {
		return rerr
	}
	return werr
}

// readAnswers reads one answer per query.
func readAnswers(r *bufio.Reader, queries []string, read func(q, header string, r *bufio.Reader) error) error {
	for _, q := range queries {
		line, err := r.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("read the answers of git cat-file: %w", err)
		}
		if err := read(q, string(line[:len(line)-1]), r); err != nil {
			return err
		}
	}
	return nil
}

// parseHeader reads an answer's header in batchFormat; a missing object
// (or a revision that names none) is objInfo{}.
func parseHeader(q, header string) (objInfo, error) {
	if header == q+" missing" || header == q+" ambiguous" {
		return objInfo{}, nil
	}
	f := strings.Split(header, " ")
	if len(f) != 3 || !gitref.ValidOID(f[0]) {
		return objInfo{}, fmt.Errorf("unexpected git cat-file answer %q", cutText(header, 200))
	}
	return objInfo{ok: true, oid: f[0], typ: f[1], size: f[2]}, nil
}

// errTreeFormat: a tree object git gave is not in the format of one.
var errTreeFormat = errors.New("git cat-file gave a malformed tree")

// treeEntries reads a tree object's content (entries "MODE NAME\0ID",
// the ID hashLen raw bytes) and returns the entries named in want. A tree
// is read as it streams: it may be large, and only a few entries matter.
func treeEntries(body io.Reader, hashLen int, want map[string]bool) (map[string]treeEntry, error) {
	r := bufio.NewReader(body)
	found := map[string]treeEntry{}
	id := make([]byte, hashLen)
	for {
		mode, err := r.ReadSlice(' ')
		switch {
		case errors.Is(err, io.EOF) && len(mode) == 0:
			return found, nil
		case err != nil:
			return nil, errTreeFormat
		}
		m, err := strconv.ParseUint(string(mode[:len(mode)-1]), 8, 32)
		if err != nil {
			return nil, errTreeFormat
		}
		name, err := readName(r)
		if err != nil {
			return nil, errTreeFormat
		}
		if _, err := io.ReadFull(r, id); err != nil {
			return nil, errTreeFormat
		}
		if want[name] {
			found[name] = treeEntry{mode: canonMode(m), oid: hex.EncodeToString(id)}
		}
	}
}

// readName reads a tree entry's name up to its NUL; a name longer than r's
// buffer is "" (a task file's name is far shorter: the working tree has it).
func readName(r *bufio.Reader) (string, error) {
	name, err := r.ReadSlice(0)
	if err == nil {
		return string(name[:len(name)-1]), nil
	}
	for errors.Is(err, bufio.ErrBufferFull) {
		_, err = r.ReadSlice(0)
	}
	return "", err
}

// canonMode prints a tree entry's mode as git ls-tree does: git reads the
// modes of old trees (100664, say) as the nearest it knows.
func canonMode(m uint64) string {
	switch m & 0o170000 {
	case 0o100000:
		if m&0o100 != 0 {
			return "100755"
		}
		return "100644"
	case 0o120000:
		return "120000"
	case 0o040000:
		return "040000"
	}
	return "160000"
}

// expectByte reads one byte from r, which must be b.
func expectByte(r *bufio.Reader, b byte) error {
	c, err := r.ReadByte()
	if err == nil && c != b {
		err = fmt.Errorf("git cat-file's answer goes on past its size")
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// unique returns ss without repetitions, in order.
func unique(ss []string) []string {
	seen := make(map[string]bool, len(ss))
	out := ss[:0]
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
