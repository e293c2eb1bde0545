package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// guardGroups gives every command that only groups others (cuecast itself,
// rollout, tailer, nats-config…) a run function, so that a misspelt
// subcommand is a usage error (exit 2, with cobra's suggestions) instead of
// cobra's default for a command that cannot run: its help and exit 0, which
// made `cuecast rollout stauts` look like success to a script.
func guardGroups(c *cobra.Command) {
	for _, sub := range c.Commands() {
		guardGroups(sub)
	}
	if !c.HasSubCommands() || c.Run != nil || c.RunE != nil {
		return
	}
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // cobra's own default, applied only at the root
	}
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return c.Help()
		}
		hint := fmt.Sprintf("see '%s --help'", c.CommandPath())
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			hint = fmt.Sprintf("did you mean '%s %s'?", c.CommandPath(), strings.Join(s, "' or '"+c.CommandPath()+" "))
		}
		return &UsageError{Err: fmt.Errorf("unknown command %q for %q", args[0], c.CommandPath()), Hint: hint}
	}
}

// guardArgs makes every argument-count check in the tree a usage error
// (exit 2) that names the command and shows its usage line, whichever
// validator the command uses: cobra's own (ExactArgs, NoArgs…) return plain
// errors, which would exit 1 with no hint. A validator that already returns
// a *UsageError keeps its own message and hint.
func guardArgs(c *cobra.Command) {
	for _, sub := range c.Commands() {
		guardArgs(sub)
	}
	check := c.Args
	if check == nil {
		return
	}
	c.Args = func(c *cobra.Command, args []string) error {
		err := check(c, args)
		var ue *UsageError
		if err == nil || errors.As(err, &ue) {
			return err
		}
		// "cuecast: log: accepts 1 arg(s)…": Main prefixes the root's name.
		if c.HasParent() {
			err = fmt.Errorf("%s: %w", strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" "), err)
		}
		return &UsageError{Err: err,
			Hint: fmt.Sprintf("usage: %s; see '%s --help'", c.UseLine(), c.CommandPath())}
	}
}
