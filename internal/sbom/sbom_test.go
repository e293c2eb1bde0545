package sbom

import (
	"encoding/json"
	"runtime/debug"
	"testing"
)

func TestGenerate(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/cuecast/cuecast", Version: "(devel)"},
		Deps: []*debug.Module{
			{Path: "github.com/nats-io/nats.go", Version: "v1.55.0", Sum: "h1:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="},
			{Path: "example.com/old", Version: "v1.0.0", Replace: &debug.Module{Path: "example.com/fork", Version: "v1.0.1"}},
		},
		Settings: []debug.BuildSetting{{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"}, {Key: "-tags", Value: "x"}},
	}
	b, err := Generate(bi, Options{Version: "v0.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	var doc CycloneDX
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("output is not JSON: %v", err)
	}
	if doc.BOMFormat != "CycloneDX" || doc.SpecVersion != "1.5" {
		t.Errorf("got format %s %s, want CycloneDX 1.5", doc.BOMFormat, doc.SpecVersion)
	}
	if got, want := doc.Metadata.Component.PURL, "pkg:golang/github.com/cuecast/cuecast@v0.1.0"; got != want {
		t.Errorf("main purl = %s, want %s", got, want)
	}
	if got := len(doc.Metadata.Properties); got != 2 {
		t.Errorf("got %d build properties, want GOOS and GOARCH only: %+v", got, doc.Metadata.Properties)
	}
	want := []Component{
		{Type: "platform", BOMRef: "pkg:golang/std@1.26.8", Name: "std", Version: "1.26.8", PURL: "pkg:golang/std@1.26.8"},
		{Type: "library", BOMRef: "pkg:golang/github.com/nats-io/nats.go@v1.55.0", Name: "github.com/nats-io/nats.go",
			Version: "v1.55.0", PURL: "pkg:golang/github.com/nats-io/nats.go@v1.55.0"},
		{Type: "library", BOMRef: "pkg:golang/example.com/fork@v1.0.1", Name: "example.com/fork", Version: "v1.0.1",
			PURL: "pkg:golang/example.com/fork@v1.0.1"},
	}
	if len(doc.Components) != len(want) {
		t.Fatalf("got %d components, want %d: %+v", len(doc.Components), len(want), doc.Components)
	}
	for i := range want {
		got := doc.Components[i]
		if got.Name != want[i].Name || got.Version != want[i].Version || got.PURL != want[i].PURL || got.Type != want[i].Type {
			t.Errorf("component %d = %+v, want %+v", i, got, want[i])
		}
	}
	// h1:47DEQpj8… is the go.sum form of this SHA-256.
	if h := doc.Components[1].Hashes; len(h) != 1 || h[0].Alg != "SHA-256" ||
		h[0].Content != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Errorf("nats.go hashes = %+v, want one SHA-256 from its go.sum line", h)
	}
}

func TestGenerateNeedsModuleInfo(t *testing.T) {
	if _, err := Generate(&debug.BuildInfo{}, Options{}); err == nil {
		t.Error("got no error for a binary without module information")
	}
}
