// Command gen writes a CycloneDX SBOM for each Go binary named on its command
// line, next to it as <binary>.cdx.json. The Makefile's release target runs it.
//
//	go run ./internal/sbom/gen [-version v0.1.0] dist/cuecast_linux_amd64 …
package main

import (
	"debug/buildinfo"
	"flag"
	"fmt"
	"os"

	"github.com/cuecast/cuecast/internal/sbom"
)

func main() {
	version := flag.String("version", "", "the release's version (a checkout build records (devel))")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: gen [-version V] BINARY...")
		os.Exit(2)
	}
	for _, path := range flag.Args() {
		if err := write(path, *version); err != nil {
			fmt.Fprintf(os.Stderr, "sbom: %v\n", err)
			os.Exit(1)
		}
	}
}

func write(path, version string) error {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read build info of %s: %w", path, err)
	}
	doc, err := sbom.Generate(bi, sbom.Options{Version: version})
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := os.WriteFile(path+".cdx.json", doc, 0o644); err != nil {
		return fmt.Errorf("write sbom of %s: %w", path, err)
	}
	return nil
}
