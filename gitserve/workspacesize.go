package gitserve

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/aimi-tools/swarm/internal/gitcmd"
)

// A ready-made workspace is the checkout of a tree a sandbox pushed: a
// few hundred KiB of push (one blob of zeros under many names) checks out
// to gigabytes. Its cost on the daemon's disk is therefore counted from
// git's own object sizes before anything is written, and only a workspace
// within git.max_workspace is made; the runner clones a larger one into
// its own sandbox.
const (
	// KeyMaxWorkspace names the bound in messages and logs.
	KeyMaxWorkspace = "git.max_workspace"
	// diskBlock is what one file or directory takes at least (an inode
	// and a block of a common filesystem): a tree of many tiny files
	// costs its blocks, not its bytes.
	diskBlock = 4096
	// maxTreeEntry bounds one entry of git's tree listing (its path).
	maxTreeEntry = 64 << 10
	// maxAttributes bounds the .gitattributes files read, and each one's
	// size: more or larger, no ready-made workspace.
	maxAttributes, maxAttributesBytes = 64, 64 << 10
)

// rewritingAttributes can make a checkout far larger than its blobs
// (ident expands "$Id$" elevenfold, working-tree-encoding re-encodes to
// UTF-16 or UTF-32): a tree whose .gitattributes name one is not counted,
// and its runner clones. text and eol at most double a file (LF to CRLF).
var rewritingAttributes = [][]byte{[]byte("ident"), []byte("working-tree-encoding")}

// treeEntry is one line of `git ls-tree -r -t -l -z`.
type treeEntry struct {
	mode, typ, oid, path string
	size                 int64 // -1 for a tree or a submodule
}

// parseTreeEntry reads "<mode> <type> <oid> <size>\t<path>" (size padded
// with spaces, "-" for trees); ok is false for anything else.
func parseTreeEntry(line []byte) (e treeEntry, ok bool) {
	meta, path, found := bytes.Cut(line, []byte{'\t'})
	f := bytes.Fields(meta)
	if !found || len(f) != 4 || len(path) == 0 {
		return e, false
	}
	e = treeEntry{mode: string(f[0]), typ: string(f[1]), oid: string(f[2]), path: string(path), size: -1}
	if string(f[3]) != "-" {
		n, err := strconv.ParseInt(string(f[3]), 10, 64)
		if err != nil || n < 0 {
			return e, false
		}
		e.size = n
	}
	return e, true
}

// roundBlock is n bytes in whole disk blocks, one at least.
func roundBlock(n int64) int64 {
	return max(diskBlock, (n+diskBlock-1)/diskBlock*diskBlock)
}

// treeCount adds up a tree's entries: its cost with files as they are,
// and with text files doubled (LF to CRLF), and its .gitattributes.
type treeCount struct {
	plain, doubled int64
	attributes     []treeEntry
}

func (c *treeCount) add(e treeEntry) error {
	if e.typ != "blob" || e.mode == "120000" {
		c.plain += diskBlock // a directory, a symbolic link, an empty submodule directory
		c.doubled += diskBlock
		return nil
	}
	if e.size < 0 || e.size > 1<<50 {
		return fmt.Errorf("blob %s has no size", e.path)
	}
	c.plain += roundBlock(e.size)
	c.doubled += roundBlock(2 * e.size)
	if filepath.Base(e.path) == ".gitattributes" {
		if len(c.attributes) == maxAttributes || e.size > maxAttributesBytes {
			return fmt.Errorf("more than %d .gitattributes files, or one larger than %d bytes: %w", maxAttributes, maxAttributesBytes, errWorkspaceTooBig)
		}
		c.attributes = append(c.attributes, e)
	}
	return nil
}

// workspaceCost is what checking out tree-ish rev of repo writes to disk
// at most, counted from git before anything is written: errWorkspaceTooBig
// (wrapped, with the figures) once it passes limit. git lists the tree in
// a stream, which stops as soon as the count passes limit.
func workspaceCost(ctx context.Context, repo, rev string, limit int64) (int64, error) {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := gitcmd.Hermetic.Command(lctx, repo, "ls-tree", "-r", "-t", "-l", "-z", "--full-tree", rev)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, fmt.Errorf("list the workspace's tree: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("list the workspace's tree: %w", err)
	}
	c, err := countTree(bufio.NewReaderSize(out, maxTreeEntry), limit)
	if err != nil {
		cancel() // git may be writing more: it is killed
		_ = cmd.Wait()
		return 0, err
	}
	if err := cmd.Wait(); err != nil {
		return 0, fmt.Errorf("list the workspace's tree: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return c.cost(ctx, repo, limit)
}

// countTree reads a tree listing (ls-tree -z) up to its end, or until its
// files pass limit.
func countTree(br *bufio.Reader, limit int64) (*treeCount, error) {
	var c treeCount
	for {
		line, err := br.ReadSlice(0)
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("a path of the tree is longer than %d bytes: %w", maxTreeEntry, errWorkspaceTooBig)
		}
		if len(line) == 0 && err != nil {
			return &c, nil
		}
		e, ok := parseTreeEntry(bytes.TrimSuffix(line, []byte{0}))
		if !ok {
			return nil, fmt.Errorf("list the workspace's tree: an entry git printed is not read: %q", line[:min(len(line), 200)])
		}
		if err := c.add(e); err != nil {
			return nil, err
		}
		if c.plain > limit {
			return nil, fmt.Errorf("its files take more than %d bytes (%s): %w", limit, KeyMaxWorkspace, errWorkspaceTooBig)
		}
	}
}

// cost is c's count, doubled when a .gitattributes may turn text to CRLF;
// a tree whose attributes rewrite files further is not counted.
func (c *treeCount) cost(ctx context.Context, repo string, limit int64) (int64, error) {
	if len(c.attributes) == 0 {
		return c.plain, nil
	}
	for _, a := range c.attributes {
		data, err := gitcmd.Hermetic.Run(ctx, repo, "cat-file", "blob", a.oid)
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", a.path, err)
		}
		for _, attr := range rewritingAttributes {
			if bytes.Contains([]byte(data), attr) {
				return 0, fmt.Errorf("%s names %s, which may make a checkout far larger than its files: %w", a.path, attr, errWorkspaceTooBig)
			}
		}
	}
	if c.doubled > limit {
		return 0, fmt.Errorf("its files take more than %d bytes with line endings converted (%s): %w", limit, KeyMaxWorkspace, errWorkspaceTooBig)
	}
	return c.doubled, nil
}

// diskUsage is what the tree at root takes on disk, in blocks as the
// filesystem counts them (du).
func diskUsage(root string) (int64, error) {
	var n int64
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		} else {
			n += roundBlock(info.Size())
		}
		return nil
	})
	return n, err
}
