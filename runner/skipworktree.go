package runner

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash"
)

// Index entry flags (git's Documentation/gitformat-index.txt): the
// extended bit says two more bytes of flags follow, among them
// skip-worktree.
const (
	indexFlagExtended     = 0x4000
	indexExtSkipWorktree  = 0x4000
	indexEntryStatBytes   = 40
	indexHeaderBytes      = 12
	indexMaxPathVarintLen = 10
)

// clearSkipWorktree clears the skip-worktree mark of path's entry in a
// version 4 index (the sparse difference's, contract.WorkspaceSkippedEntry)
// and makes its checksum again; index is changed in place. found false:
// no entry of path carries the mark (index unchanged). The index is the
// daemon's, yet read as untrusted: any inconsistency is an error, and the
// caller then fills the workspace the old way.
func clearSkipWorktree(index []byte, path string) (found bool, err error) {
	h, oidLen := indexHash(index)
	if h == nil {
		return false, errors.New("the index's checksum is neither SHA-1 nor SHA-256")
	}
	body := index[:len(index)-h.Size()]
	if len(body) < indexHeaderBytes || string(body[:4]) != "DIRC" || binary.BigEndian.Uint32(body[4:8]) != 4 {
		return false, errors.New("not a version 4 index")
	}
	n := binary.BigEndian.Uint32(body[8:12])
	off, prev := indexHeaderBytes, []byte(nil)
	for i := uint32(0); i < n; i++ {
		fixed := indexEntryStatBytes + oidLen + 2
		if off+fixed > len(body) {
			return false, errors.New("the index ends inside an entry")
		}
		flagsAt := off + indexEntryStatBytes + oidLen
		flags := binary.BigEndian.Uint16(body[flagsAt:])
		off += fixed
		extAt := -1
		if flags&indexFlagExtended != 0 {
			if off+2 > len(body) {
				return false, errors.New("the index ends inside an entry's flags")
			}
			extAt, off = off, off+2
		}
		strip, k := indexVarint(body[off:])
		if k == 0 || strip > uint64(len(prev)) {
			return false, errors.New("an index entry's path is malformed")
		}
		off += k
		end := bytes.IndexByte(body[off:], 0)
		if end < 0 {
			return false, errors.New("an index entry's path does not end")
		}
		name := append(prev[:len(prev)-int(strip):len(prev)-int(strip)], body[off:off+end]...)
		off += end + 1
		prev = name
		if string(name) != path || extAt < 0 {
			continue
		}
		ext := binary.BigEndian.Uint16(body[extAt:])
		if ext&indexExtSkipWorktree == 0 {
			return false, nil
		}
		binary.BigEndian.PutUint16(body[extAt:], ext&^indexExtSkipWorktree)
		h.Reset()
		h.Write(body)
		copy(index[len(body):], h.Sum(nil))
		return true, nil
	}
	return false, nil
}

// indexHash is the hash whose sum ends index (git's object format: SHA-1,
// or SHA-256 with 32-byte object ids), nil when neither matches.
func indexHash(index []byte) (h hash.Hash, oidLen int) {
	for _, c := range []struct {
		h      hash.Hash
		oidLen int
	}{{sha1.New(), sha1.Size}, {sha256.New(), sha256.Size}} {
		n := c.h.Size()
		if len(index) < indexHeaderBytes+n {
			continue
		}
		c.h.Write(index[:len(index)-n])
		if bytes.Equal(c.h.Sum(nil), index[len(index)-n:]) {
			return c.h, c.oidLen
		}
	}
	return nil, 0
}

// indexVarint decodes git's offset varint (varint.c) at the start of b:
// the value and the bytes it took (0: malformed).
func indexVarint(b []byte) (uint64, int) {
	if len(b) == 0 {
		return 0, 0
	}
	c := b[0]
	val := uint64(c & 127)
	i := 1
	for c&128 != 0 {
		if i >= len(b) || i >= indexMaxPathVarintLen {
			return 0, 0
		}
		val++
		c = b[i]
		i++
		val = val<<7 + uint64(c&127)
	}
	return val, i
}
