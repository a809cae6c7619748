package state

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzDecodeRecord: journal lines are read back after crashes and by other
// tools; decoding never panics, and what decodes re-encodes to a line that
// decodes the same.
func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte(`{"seq":1,"cursor":"2026-11-22T10:31:00.123456789Z","time":"2026-11-22T10:31:00Z","stream":"stdout","valid":true,"type":"completion","message":{"type":"completion","payload":{"status":"completed","prUrl":null,"errors":[]}}}`))
	f.Add([]byte(`{"seq":2,"cursor":"","time":"2026-11-22T10:31:00Z","stream":"stderr","valid":false,"reason":"not JSON","rawBase64":"//4="}`))
	f.Add([]byte(`{"seq":0}`))
	f.Add([]byte(`{"seq":3,"stream":"daemon","time":"2026-11-22T10:31:00Z","valid":true,"extra":1}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := DecodeRecord(line)
		if err != nil {
			return
		}
		_ = r.RawLine()
		_, _ = r.DecodeMessage()
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("decoded record does not encode: %v", err)
		}
		r2, err := DecodeRecord(b)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v\n%s", err, b)
		}
		b2, _ := json.Marshal(r2)
		if !bytes.Equal(b, b2) {
			t.Fatalf("record changed on a round trip:\n%s\n%s", b, b2)
		}
	})
}

// FuzzScanJournal: a journal file of any content is read without panic,
// and a torn tail never hides the records before it.
func FuzzScanJournal(f *testing.F) {
	f.Add([]byte("{\"seq\":1,\"cursor\":\"\",\"time\":\"2026-11-22T10:31:00Z\",\"stream\":\"daemon\",\"valid\":false,\"raw\":\"x\"}\n{\"seq\":2,"))
	f.Add([]byte("\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		n, size := 0, 0
		_ = scanJournal(bytes.NewReader(data), func(_ Record, s int) error { n++; size += s; return nil })
		if n > bytes.Count(data, []byte("\n")) {
			t.Fatalf("%d records from %d lines", n, bytes.Count(data, []byte("\n")))
		}
		if size > len(data) || (n > 0 && data[size-1] != '\n') {
			t.Fatalf("records span %d of %d bytes, not ending at a newline", size, len(data))
		}
	})
}

// FuzzDecodeState: state files are written by other tools too; loading
// never panics, and a state that decodes re-encodes to one that decodes the
// same.
func FuzzDecodeState(f *testing.F) {
	f.Add([]byte(`{"swarmId":"6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b","createdAt":"2026-11-22T10:31:00Z","updatedAt":"2026-11-22T10:31:00Z","containers":[{"containerId":"abc000abc000","containerName":"a","taskFilePath":"t.json","branchName":"feat/a","status":"running","prUrl":null,"storyProgress":{"total":2,"completed":1,"failed":0,"inProgress":1,"pending":0},"createdAt":"2026-11-22T10:31:00Z","updatedAt":"2026-11-22T10:31:00Z","acpPid":7}]}`))
	f.Add([]byte(``))
	f.Add([]byte(`{"swarmId":"x","containers":[null]}`))
	f.Add([]byte(`{"swarmId":"x","containers":[],"land":{"branch":"aimi/land/x","onto":"main","results":[{"container":"a","taskFile":"t.json","branch":"feat/a","outcome":"held","reason":"r","tip":"t","files":["f"],"verify":"failed"}],"skipped":[{"name":"b","reason":"r"}],"running":true,"updated":"2026-11-22T11:31:00+01:00"}}`))
	f.Add([]byte(`{"swarmId":"x","createdAt":"2026-11-22T11:31:00+01:00"} {}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		sw, err := Decode(data)
		if err != nil {
			return
		}
		_ = sw.Validate()
		b, err := json.Marshal(sw)
		if err != nil {
			t.Fatalf("decoded state does not encode: %v", err)
		}
		sw2, err := Decode(b)
		if err != nil {
			t.Fatalf("re-encoded state does not decode: %v\n%s", err, b)
		}
		b2, _ := json.Marshal(sw2)
		if !bytes.Equal(b, b2) {
			t.Fatalf("state changed on a round trip:\n%s\n%s", b, b2)
		}
	})
}
