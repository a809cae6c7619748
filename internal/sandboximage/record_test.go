package sandboximage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/internal/atomicfile"
)

func TestRecordedImageRoundTripIgnoresTempFiles(t *testing.T) {
	dir := t.TempDir()
	key, id := strings.Repeat("ab", 16), "sha256:"+strings.Repeat("0f", 32)
	if err := recordImage(dir, key, id); err != nil {
		t.Fatal(err)
	}
	if got := recordedImage(dir, key); got != id {
		t.Fatalf("recorded %q, want %q", got, id)
	}
	// A writer killed mid-write leaves a temp file; it is no record.
	stale := filepath.Join(dir, imagesDir, atomicfile.TempPrefix(filepath.Join(dir, imagesDir, key))+"1")
	if err := os.WriteFile(stale, []byte("sha256:"+strings.Repeat("11", 32)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !isRecorded(dir, id) || isRecorded(dir, "sha256:"+strings.Repeat("11", 32)) {
		t.Fatal("isRecorded must see the record and not the temp file")
	}
	fi, err := os.Stat(filepath.Join(dir, imagesDir, key))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Fatalf("record file mode %v, want 0644", fi.Mode().Perm())
	}
}
