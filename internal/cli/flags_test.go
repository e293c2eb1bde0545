package cli

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestFlagUsageHasNoBackticks: pflag takes a `quoted` word in a flag's usage
// for the name of its value, so "as `cuecast keys` prints it" rendered as
// "--trusted-key cuecast keys" in --help (issue 17, item 8).
func TestFlagUsageHasNoBackticks(t *testing.T) {
	for _, c := range CommandTree() {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if strings.Contains(f.Usage, "`") {
				t.Errorf("%s --%s: usage %q has a backtick; quote with ' instead", c.CommandPath(), f.Name, f.Usage)
			}
		})
	}
}
