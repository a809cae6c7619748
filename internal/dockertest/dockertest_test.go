package dockertest

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"testing"
)

func TestImageNameIsAValidRepositoryComponent(t *testing.T) {
	tests := []struct{ in, want string }{
		{"TestEngine", "testengine"},
		{"TestEngine/engine/50_containers at once", "testengine-engine-50-containers-at-once"},
		{"///", "image"},
		{"TestAVeryLongNameThatGoesOnAndOnAndOnAndOnAndOnAndOnAndOnAndOnForever", "testaverylongnamethatgoesonandonandonandonandonandonandonand"},
	}
	for _, tt := range tests {
		if got := imageName(tt.in); got != tt.want {
			t.Errorf("imageName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestTarOfHoldsEveryFileExecutable(t *testing.T) {
	b, err := tarOf(map[string][]byte{"Dockerfile": []byte("FROM scratch\n"), "bin0": []byte("ELF")})
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(b))
	got := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		got[h.Name] = string(body)
		if h.Mode&0o111 == 0 {
			t.Errorf("%s not executable", h.Name)
		}
	}
	if got["Dockerfile"] != "FROM scratch\n" || got["bin0"] != "ELF" || len(got) != 2 {
		t.Fatalf("tar holds %v", got)
	}
}

func TestCleanupByLabelWithNothingLabelledSucceeds(t *testing.T) {
	Client(t) // fails without an engine, skips with AIMI_SKIP_DOCKER=1
	if err := CleanupByLabel(context.Background(), LabelKey, "nothing-"+RunID()); err != nil {
		t.Fatal(err)
	}
}
