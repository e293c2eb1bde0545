package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cuecast/cuecast/internal/buildinfo"
)

// VersionOptions are the flags of `cuecast version`.
type VersionOptions struct {
	Output string
}

func newVersionCmd(env *Env, runF func(*cobra.Command, *VersionOptions) error) *cobra.Command {
	opts := &VersionOptions{}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print cuecast's version, commit, build date and Go version",
		Long: `Version prints which cuecast this is. A release binary says the version it was
tagged with; a binary from 'go install github.com/cuecast/cuecast/cmd/cuecast@vX.Y.Z'
says vX.Y.Z; a build from a checkout says "devel" and the commit it was built from.
'cuecast --version' prints the first line only.`,
		Example: `  cuecast version
  cuecast version --output json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := validateOutput(opts.Output, "text", "json"); err != nil {
				return err
			}
			if runF != nil {
				return runF(c, opts)
			}
			return versionRun(env, opts)
		},
	}
	registerOutput(cmd.Flags(), &opts.Output)
	return cmd
}

func versionRun(env *Env, opts *VersionOptions) error {
	info := buildinfo.Read()
	if opts.Output == "json" {
		return writeJSON(env.IO.Out, info)
	}
	fmt.Fprintln(env.IO.Out, versionLine(info))
	commit := info.Commit
	if info.Modified {
		commit += " (modified)"
	}
	t := newTable(env.IO.Out)
	t.row("commit:", commit)
	if info.Date != "" {
		t.row("built:", info.Date)
	}
	t.row("go:", info.GoVersion)
	t.row("platform:", info.Platform)
	t.flush()
	return nil
}

func versionLine(info buildinfo.Info) string {
	return "cuecast " + info.Version
}
