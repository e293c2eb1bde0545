// Package sbom writes a software bill of materials for a Go binary from the
// build information the Go toolchain embeds in it: the main module, every
// dependency module with its version and go.sum hash, and the toolchain. The
// format is CycloneDX 1.5 JSON, which scanners such as Trivy and Grype read.
//
// It reads the binary, not the source tree, so the SBOM lists exactly what
// was linked for that platform (a darwin build may link fewer modules).
package sbom

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strings"
)

// CycloneDX is the subset of a CycloneDX 1.5 document that a Go binary fills.
type CycloneDX struct {
	BOMFormat    string      `json:"bomFormat"`
	SpecVersion  string      `json:"specVersion"`
	SerialNumber string      `json:"serialNumber,omitempty"`
	Version      int         `json:"version"`
	Metadata     Metadata    `json:"metadata"`
	Components   []Component `json:"components"`
}

// Metadata names the binary the document describes.
type Metadata struct {
	Timestamp  string     `json:"timestamp,omitempty"`
	Component  Component  `json:"component"`
	Properties []Property `json:"properties,omitempty"`
}

// Component is one Go module (or the toolchain).
type Component struct {
	Type    string `json:"type"`
	BOMRef  string `json:"bom-ref"`
	Name    string `json:"name"`
	Version string `json:"version"`
	PURL    string `json:"purl,omitempty"`
	Hashes  []Hash `json:"hashes,omitempty"`
}

// Hash is a component's content hash.
type Hash struct {
	Alg     string `json:"alg"`
	Content string `json:"content"`
}

// Property is a name and value pair.
type Property struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Options say what the build information cannot.
type Options struct {
	// Version overrides the main module's version (a release's tag; a build
	// from a checkout records "(devel)").
	Version string
	// Timestamp is the document's time, RFC 3339; empty leaves it out, which
	// keeps the output reproducible.
	Timestamp string
}

// Generate returns the CycloneDX document for one binary's build information.
func Generate(bi *debug.BuildInfo, o Options) ([]byte, error) {
	if bi == nil || bi.Main.Path == "" {
		return nil, fmt.Errorf("generate sbom: the binary carries no module build information")
	}
	version := bi.Main.Version
	if o.Version != "" {
		version = o.Version
	}
	doc := CycloneDX{
		BOMFormat:   "CycloneDX",
		SpecVersion: "1.5",
		Version:     1,
		Metadata: Metadata{
			Timestamp: o.Timestamp,
			Component: Component{
				Type: "application", BOMRef: purl(bi.Main.Path, version),
				Name: bi.Main.Path, Version: version, PURL: purl(bi.Main.Path, version),
			},
		},
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "GOOS", "GOARCH", "CGO_ENABLED", "-trimpath", "-ldflags", "vcs.revision", "vcs.time":
			doc.Metadata.Properties = append(doc.Metadata.Properties, Property{Name: "go:build:" + s.Key, Value: s.Value})
		}
	}
	goVersion := strings.TrimPrefix(bi.GoVersion, "go")
	doc.Components = append(doc.Components, Component{
		Type: "platform", BOMRef: "pkg:golang/std@" + goVersion,
		Name: "std", Version: goVersion, PURL: "pkg:golang/std@" + goVersion,
	})
	for _, d := range bi.Deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		c := Component{
			Type: "library", BOMRef: purl(m.Path, m.Version),
			Name: m.Path, Version: m.Version, PURL: purl(m.Path, m.Version),
		}
		if h, ok := sumHash(m.Sum); ok {
			c.Hashes = []Hash{h}
		}
		doc.Components = append(doc.Components, c)
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("generate sbom: %w", err)
	}
	return append(b, '\n'), nil
}

// purl is the package URL of a Go module (github.com/package-url/purl-spec,
// type golang): the path's segments are kept, the version is the module's.
func purl(path, version string) string {
	return "pkg:golang/" + path + "@" + version
}

// sumHash turns a go.sum "h1:<base64 sha-256>" into a CycloneDX SHA-256.
func sumHash(sum string) (Hash, bool) {
	b64, ok := strings.CutPrefix(sum, "h1:")
	if !ok {
		return Hash{}, false
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != 32 {
		return Hash{}, false
	}
	return Hash{Alg: "SHA-256", Content: hex.EncodeToString(raw)}, true
}
