package gitserve

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/gitref"
)

const (
	oidA = "1111111111111111111111111111111111111111"
	oidB = "2222222222222222222222222222222222222222"
	zero = "0000000000000000000000000000000000000000"
)

func pkt(s string) string { return string(pktLine([]byte(s))) }

func TestParsePushCommands(t *testing.T) {
	caps := "\x00report-status side-band-64k agent=git/2.39.5"
	tests := []struct {
		name    string
		body    string
		want    []RefUpdate
		caps    []string
		shallow int
		wantErr string
	}{
		{name: "one update with capabilities",
			body: pkt(oidA+" "+oidB+" refs/heads/feat"+caps+"\n") + "0000PACK...",
			want: []RefUpdate{{oidA, oidB, "refs/heads/feat"}}, caps: []string{"report-status", "side-band-64k", "agent=git/2.39.5"}},
		{name: "several updates, newline optional",
			body: pkt(zero+" "+oidB+" refs/heads/new"+caps) + pkt(oidA+" "+zero+" refs/heads/old\n") + "0000",
			want: []RefUpdate{{zero, oidB, "refs/heads/new"}, {oidA, zero, "refs/heads/old"}}, caps: []string{"report-status", "side-band-64k", "agent=git/2.39.5"}},
		{name: "shallow lines before the commands",
			body: pkt("shallow "+oidA+"\n") + pkt(oidA+" "+oidB+" refs/heads/x\x00report-status\n") + "0000",
			want: []RefUpdate{{oidA, oidB, "refs/heads/x"}}, caps: []string{"report-status"}, shallow: 1},
		{name: "sha256 ids", body: pkt(strings.Repeat("a", 64)+" "+strings.Repeat("b", 64)+" refs/heads/x\x00\n") + "0000",
			want: []RefUpdate{{strings.Repeat("a", 64), strings.Repeat("b", 64), "refs/heads/x"}}},
		{name: "empty command list", body: "0000", want: nil},
		{name: "push certificate is refused", body: pkt("push-cert\x00report-status\n") + pkt("certificate version 0.1\n"), wantErr: "signed pushes"},
		{name: "truncated body", body: pkt(oidA + " " + oidB + " refs/heads/x")[:20], wantErr: "unexpected EOF"},
		{name: "no flush", body: pkt(oidA + " " + oidB + " refs/heads/x\n"), wantErr: "unexpected EOF"},
		{name: "non-hex length", body: "00zz", wantErr: "not hex"},
		{name: "delim packet", body: "0001", wantErr: "out of range"},
		{name: "length too short", body: "0003", wantErr: "out of range"},
		{name: "uppercase id", body: pkt(strings.ToUpper("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")+" "+oidB+" refs/heads/x\n") + "0000", wantErr: "invalid object ids"},
		{name: "mixed id sizes", body: pkt(oidA+" "+strings.Repeat("b", 64)+" refs/heads/x\n") + "0000", wantErr: "invalid object ids"},
		{name: "two zero ids", body: pkt(zero+" "+zero+" refs/heads/x\n") + "0000", wantErr: "two zero ids"},
		{name: "ref outside refs/", body: pkt(oidA+" "+oidB+" HEAD\n") + "0000", wantErr: "invalid ref"},
		{name: "ref with ..", body: pkt(oidA+" "+oidB+" refs/heads/../x\n") + "0000", wantErr: "invalid ref"},
		{name: "ref with a space smuggled", body: pkt(oidA+" "+oidB+" refs/heads/a refs/heads/b\n") + "0000", wantErr: "is not"},
		{name: "NUL in a later command", body: pkt(oidA+" "+oidB+" refs/heads/a\x00caps\n") + pkt(oidA+" "+oidB+" refs/heads/b\x00more\n") + "0000", wantErr: "NUL"},
		{name: "shallow after a command", body: pkt(oidA+" "+oidB+" refs/heads/a\n") + pkt("shallow "+oidA+"\n") + "0000", wantErr: "shallow line after"},
		{name: "shallow only", body: pkt("shallow "+oidA+"\n") + "0000", wantErr: "no command"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := strings.NewReader(tc.body)
			cmds, head, err := ParsePushCommands(r)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(cmds.Updates) != len(tc.want) {
				t.Fatalf("updates = %+v, want %+v", cmds.Updates, tc.want)
			}
			for i := range tc.want {
				if cmds.Updates[i] != tc.want[i] {
					t.Errorf("update %d = %+v, want %+v", i, cmds.Updates[i], tc.want[i])
				}
			}
			if strings.Join(cmds.Capabilities, ",") != strings.Join(tc.caps, ",") {
				t.Errorf("caps = %q, want %q", cmds.Capabilities, tc.caps)
			}
			if len(cmds.Shallow) != tc.shallow {
				t.Errorf("shallow = %d, want %d", len(cmds.Shallow), tc.shallow)
			}
			// head plus what is left of the reader is the body, byte for byte.
			rest, _ := io.ReadAll(r)
			if got := string(head) + string(rest); got != tc.body {
				t.Errorf("head+rest = %q, want the body %q", got, tc.body)
			}
		})
	}
}

func TestParsePushCommandsBounds(t *testing.T) {
	var b bytes.Buffer
	for i := 0; i <= maxCommands; i++ {
		b.WriteString(pkt(oidA + " " + oidB + " refs/heads/x\n"))
	}
	b.WriteString("0000")
	if _, _, err := ParsePushCommands(&b); err == nil {
		t.Fatal("more than maxCommands updates accepted")
	}
}

func TestRefusalReport(t *testing.T) {
	cmds := PushCommands{
		Updates:      []RefUpdate{{oidA, oidB, "refs/heads/main"}},
		Capabilities: []string{"report-status"},
	}
	got := string(refusalReport(cmds, func(RefUpdate) string { return "no" }))
	want := pkt("unpack ok\n") + pkt("ng refs/heads/main no\n") + "0000"
	if got != want {
		t.Fatalf("plain report = %q, want %q", got, want)
	}
	cmds.Capabilities = append(cmds.Capabilities, "side-band-64k")
	got = string(refusalReport(cmds, func(RefUpdate) string { return "no" }))
	want = pkt("\x02no\n") + pkt("\x01"+want) + "0000"
	if got != want {
		t.Fatalf("side-band report = %q, want %q", got, want)
	}
}

func FuzzParsePushCommands(f *testing.F) {
	f.Add([]byte(pkt(oidA+" "+oidB+" refs/heads/feat\x00report-status side-band-64k\n") + "0000PACK"))
	f.Add([]byte(pkt("shallow "+oidA+"\n") + pkt(zero+" "+oidB+" refs/heads/x\x00\n") + pkt(oidA+" "+zero+" refs/tags/v1") + "0000"))
	f.Add([]byte(pkt("push-cert\x00report-status\n")))
	f.Add([]byte("0000"))
	f.Add([]byte("fff0"))
	f.Fuzz(func(t *testing.T, body []byte) {
		r := bytes.NewReader(body)
		cmds, head, err := ParsePushCommands(r)
		rest, _ := io.ReadAll(r)
		// Nothing read is ever lost: head and the rest are the body.
		if got := append(append([]byte(nil), head...), rest...); err == nil && !bytes.Equal(got, body) {
			t.Fatalf("head+rest != body")
		}
		if err != nil {
			return
		}
		for _, u := range cmds.Updates {
			if !gitref.ValidOID(u.Old) || !gitref.ValidOID(u.New) || !validRefName(u.Ref) || strings.ContainsAny(u.Ref, " \x00\n") {
				t.Fatalf("accepted a bad update %+v", u)
			}
		}
		_ = refusalReport(cmds, func(RefUpdate) string { return "no" })
	})
}

// BenchmarkParsePushCommands: the gate's cost per push (a typical
// one-ref command list followed by the pack).
func BenchmarkParsePushCommands(b *testing.B) {
	body := []byte(pkt(oidA+" "+oidB+" refs/heads/feat\x00report-status side-band-64k agent=git/2.39.5\n") + "0000" + strings.Repeat("P", 4096))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ParsePushCommands(bytes.NewReader(body)); err != nil {
			b.Fatal(err)
		}
	}
}
