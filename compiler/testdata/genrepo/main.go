// Command genrepo writes a repo made by internal/gen to a directory, for
// bench-vs-cue.sh: go run ./compiler/testdata/genrepo -configs 2000 DIR
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/cuecast/cuecast/internal/gen"
)

func main() {
	configs := flag.Int("configs", 2000, "number of configs")
	seed := flag.Uint64("seed", 7, "seed")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: genrepo [-configs N] [-seed S] DIR")
		os.Exit(2)
	}
	if err := gen.Repo(gen.Options{Configs: *configs, Seed: *seed}).Write(flag.Arg(0)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
