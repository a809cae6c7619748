package gitserve

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/aimi-tools/swarm/gitref"
)

// Limits of the push command list. A push names one ref per branch it
// updates; these bounds only stop a hostile body from holding memory.
const (
	maxPktLen       = 65520   // git's LARGE_PACKET_MAX, the 4 length bytes included
	maxCommandBytes = 1 << 20 // the whole command list, shallow lines included
	maxCommands     = 1000
)

// RefUpdate is one command of a push: set Ref from Old to New. An all-zero
// Old creates the ref, an all-zero New deletes it.
type RefUpdate struct {
	Old, New, Ref string
}

// IsDelete reports whether the update deletes its ref.
func (u RefUpdate) IsDelete() bool { return zeroOID(u.New) }

// PushCommands is the head of a git-receive-pack request body: what git's
// pack-protocol calls update-requests, up to and including the flush-pkt.
type PushCommands struct {
	Updates      []RefUpdate
	Capabilities []string // from the first command, after the NUL
	Shallow      []string
}

// Has reports whether the client asked for capability c.
func (p PushCommands) Has(c string) bool {
	for _, x := range p.Capabilities {
		if x == c {
			return true
		}
	}
	return false
}

// ErrPushCert: signed pushes carry their commands inside a certificate;
// the service does not accept them.
var ErrPushCert = errors.New("signed pushes (push certificates) are not accepted by the aimi git service")

// ParsePushCommands reads the command list at the start of a
// git-receive-pack request body (gitprotocol-pack: update-requests):
//
//	*PKT-LINE("shallow" SP obj-id LF)
//	PKT-LINE(old-id SP new-id SP name NUL capability-list LF?)
//	*PKT-LINE(old-id SP new-id SP name LF?)
//	flush-pkt
//
// It returns the commands and every byte it read from r (the command list
// and whatever it buffered past it), which the caller puts back in front of
// the rest of r before handing the body to git. It
// refuses anything else: push certificates, malformed lengths, ids that are
// not lowercase hex of one hash size, ref names that are not under refs/.
func ParsePushCommands(r io.Reader) (PushCommands, []byte, error) {
	var (
		out  PushCommands
		head bytes.Buffer
		br   = bufio.NewReaderSize(r, 4096)
	)
	for {
		if head.Len() > maxCommandBytes {
			return out, head.Bytes(), fmt.Errorf("push command list longer than %d bytes", maxCommandBytes)
		}
		var lenBuf [4]byte
		if _, err := io.ReadFull(br, lenBuf[:]); err != nil {
			return out, head.Bytes(), fmt.Errorf("read pkt-line length: %w", unexpected(err))
		}
		head.Write(lenBuf[:])
		n, err := strconv.ParseUint(string(lenBuf[:]), 16, 16)
		if err != nil {
			return out, head.Bytes(), fmt.Errorf("pkt-line length %q is not hex", lenBuf[:])
		}
		if n == 0 { // flush-pkt: end of the command list
			if len(out.Updates) == 0 && len(out.Shallow) > 0 {
				return out, head.Bytes(), errors.New("push request has shallow lines but no command")
			}
			return out, unread(head.Bytes(), br), nil
		}
		if n < 5 || n > maxPktLen {
			return out, head.Bytes(), fmt.Errorf("pkt-line length %d out of range in a push command list", n)
		}
		line := make([]byte, n-4)
		if _, err := io.ReadFull(br, line); err != nil {
			return out, head.Bytes(), fmt.Errorf("read pkt-line: %w", unexpected(err))
		}
		head.Write(line)
		if err := out.addLine(line); err != nil {
			return out, head.Bytes(), err
		}
	}
}

// unread returns head plus what br buffered beyond it, so that nothing read
// from the underlying reader is lost.
func unread(head []byte, br *bufio.Reader) []byte {
	rest, _ := br.Peek(br.Buffered())
	return append(head, rest...)
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

func (p *PushCommands) addLine(line []byte) error {
	s := strings.TrimSuffix(string(line), "\n")
	if oid, ok := strings.CutPrefix(s, "shallow "); ok {
		if len(p.Updates) > 0 {
			return errors.New("shallow line after a push command")
		}
		if !gitref.ValidOID(oid) {
			return fmt.Errorf("shallow line with invalid object id %q", clip(oid))
		}
		p.Shallow = append(p.Shallow, oid)
		return nil
	}
	if strings.HasPrefix(s, "push-cert") {
		return ErrPushCert
	}
	if len(p.Updates) == 0 {
		cmd, caps, hasCaps := strings.Cut(s, "\x00")
		if hasCaps {
			p.Capabilities = strings.Fields(caps)
		}
		s = cmd
	} else if strings.ContainsRune(s, 0) {
		return errors.New("NUL in a push command other than the first")
	}
	if len(p.Updates) >= maxCommands {
		return fmt.Errorf("more than %d ref updates in one push", maxCommands)
	}
	f := strings.Split(s, " ")
	if len(f) != 3 {
		return fmt.Errorf("push command %q is not \"old-id new-id ref\"", clip(s))
	}
	u := RefUpdate{Old: f[0], New: f[1], Ref: f[2]}
	if !gitref.ValidOID(u.Old) || !gitref.ValidOID(u.New) || len(u.Old) != len(u.New) {
		return fmt.Errorf("push command for %q has invalid object ids", clip(u.Ref))
	}
	if zeroOID(u.Old) && zeroOID(u.New) {
		return fmt.Errorf("push command for %q has two zero ids", clip(u.Ref))
	}
	if !validRefName(u.Ref) {
		return fmt.Errorf("push command names an invalid ref %q", clip(u.Ref))
	}
	p.Updates = append(p.Updates, u)
	return nil
}

func zeroOID(s string) bool { return strings.Trim(s, "0") == "" }

// validRefName is a conservative subset of git check-ref-format: under
// refs/, printable ASCII without the characters git forbids, no "..", no
// empty or dot-leading components, no ".lock" suffix. Anything it refuses
// is refused as a push; the exact comparison with the granted ref is what
// grants, this only keeps odd names out of logs and messages.
func validRefName(s string) bool {
	if !strings.HasPrefix(s, "refs/") || len(s) > 1024 || strings.Contains(s, "..") ||
		strings.Contains(s, "@{") || strings.HasSuffix(s, ".lock") || strings.HasSuffix(s, "/") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("~^:?*[\\", c) >= 0 {
			return false
		}
	}
	for _, comp := range strings.Split(s, "/") {
		if comp == "" || comp[0] == '.' {
			return false
		}
	}
	return true
}

// clip keeps untrusted strings short in error messages.
func clip(s string) string {
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// pktLine frames payload as one pkt-line.
func pktLine(payload []byte) []byte {
	return append([]byte(fmt.Sprintf("%04x", len(payload)+4)), payload...)
}

// refusalReport is the receive-pack answer refusing every update of cmds
// with reason: "unpack ok" and one "ng <ref> <reason>" per update (git
// prints " ! [remote rejected] ... (reason)" and fails the push), wrapped in
// side-band channel 1 when the client asked for side-band, with the reason
// also on channel 2 (git prints it as "remote: ...").
func refusalReport(cmds PushCommands, reason func(RefUpdate) string) []byte {
	var report bytes.Buffer
	if cmds.Has("report-status") || cmds.Has("report-status-v2") {
		report.Write(pktLine([]byte("unpack ok\n")))
		for _, u := range cmds.Updates {
			report.Write(pktLine([]byte("ng " + u.Ref + " " + reason(u) + "\n")))
		}
		report.WriteString("0000")
	}
	if !cmds.Has("side-band-64k") && !cmds.Has("side-band") {
		return report.Bytes()
	}
	chunk := 65515 // side-band-64k payload per packet, band byte excluded
	if !cmds.Has("side-band-64k") {
		chunk = 995
	}
	var out bytes.Buffer
	seen := map[string]bool{}
	for _, u := range cmds.Updates {
		msg := reason(u)
		if !seen[msg] {
			seen[msg] = true
			out.Write(pktLine(append([]byte{2}, []byte(msg+"\n")...)))
		}
	}
	data := report.Bytes()
	for len(data) > 0 {
		n := min(chunk, len(data))
		out.Write(pktLine(append([]byte{1}, data[:n]...)))
		data = data[n:]
	}
	out.WriteString("0000")
	return out.Bytes()
}
