// Package cli is the cuecast command line: one cobra command per file, each
// built fresh per invocation with its flags bound into an Options struct and a
// run function testable without cobra.
package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cuecast/cuecast/internal/buildinfo"
	"github.com/cuecast/cuecast/internal/iostreams"
)

// Env is what every command gets from its invocation: streams, environment and
// the global flags. Nothing is read from process globals past this point.
type Env struct {
	IO        *iostreams.IOStreams
	Getenv    func(string) string
	LogFormat string
	LogLevel  string
	// rewatchPause waits d before watch or agent watches a config again
	// (nil: a timer); tests count the re-watches through it.
	rewatchPause func(ctx context.Context, d time.Duration) error
}

// Logger builds the structured logger for this invocation, writing to stderr.
func (e *Env) Logger() *slog.Logger {
	level, _ := logLevel(e.LogLevel) // checked by checkLogFlags; info otherwise
	opts := &slog.HandlerOptions{Level: level}
	if e.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(e.IO.ErrOut, opts))
	}
	return slog.New(slog.NewTextHandler(e.IO.ErrOut, opts))
}

// logLevel is --log-level's level; ok is false for a name it does not
// know, which is info.
func logLevel(name string) (level slog.Level, ok bool) {
	switch strings.ToLower(name) {
	case "debug":
		return slog.LevelDebug, true
	case "info":
		return slog.LevelInfo, true
	case "warn":
		return slog.LevelWarn, true
	case "error":
		return slog.LevelError, true
	}
	return slog.LevelInfo, false
}

// checkLogFlags refuses a --log-level or --log-format that Logger does not
// know, as wrong usage.
func (e *Env) checkLogFlags() error {
	if _, ok := logLevel(e.LogLevel); !ok {
		return usageErrorf("use debug, info, warn or error", "unknown --log-level %q", e.LogLevel)
	}
	switch e.LogFormat {
	case "text", "json":
	default:
		return usageErrorf("use text or json", "unknown --log-format %q", e.LogFormat)
	}
	return nil
}

// NewRootCmd builds the whole command tree for one invocation.
func NewRootCmd(env *Env) *cobra.Command {
	root := &cobra.Command{
		Use:   "cuecast",
		Short: "Configuration as code: CUE in Git, delivered over NATS",
		Long: `cuecast compiles CUE configs from a Git repository, turns every commit on main
into numbered versions, and delivers them to the services that embed its client.

Quick start:
  cuecast demo                      the whole pipeline on configs-example/, end to end
  cuecast compile --repo DIR        validate every config and print checksums
  cuecast serve --repo DIR          run the pipeline with an embedded NATS server
  cuecast keys --data DIR           the public keys every service must trust
  cuecast watch --config PATH --instance ID --trusted-keys-file FILE
  cuecast status

Exit codes: 0 ok, 1 cuecast failed, 2 wrong usage, 3 invalid configs, 4 halted or timed out,
5 set: the value changed (--expect), 6 set: refused (not a literal)`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&env.LogFormat, "log-format", "text", "log format on stderr: text or json")
	root.PersistentFlags().StringVar(&env.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	// A typo in either would otherwise fall back to text at info without a
	// word, and a debug session would show nothing it asked for.
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return env.checkLogFlags() }
	root.SetOut(env.IO.Out)
	root.SetErr(env.IO.ErrOut)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &UsageError{Err: err, Hint: fmt.Sprintf("see '%s --help'", c.CommandPath())}
	})
	root.AddCommand(
		newCompileCmd(env, nil),
		newExplainCmd(env, nil),
		newServeCmd(env, nil),
		newWatchCmd(env, nil),
		newAgentCmd(env, nil),
		newKeysCmd(env),
		newStatusCmd(env, nil),
		newLogCmd(env, nil),
		newTailerCmd(env, nil),
		newRepairCmd(env, nil),
		newDemoCmd(env, nil),
		newRolloutCmd(env, nil),
		newRollbackCmd(env, nil),
		newRevertCmd(env, nil),
		newCheckCmd(env, nil),
		newNATSConfigCmd(env, nil, nil),
		newSummarizeCmd(env, nil),
		newVersionCmd(env, nil),
		newInitCmd(env, nil),
		newFlagsCmd(env, nil),
		newGenCmd(env, nil),
		newSetCmd(env, nil),
	)
	guardGroups(root)
	guardArgs(root)
	root.Version = versionLine(buildinfo.Read())
	root.SetVersionTemplate("{{.Version}}\n")
	return root
}

// Main runs one invocation and returns its exit status.
func Main(ctx context.Context, args []string, io *iostreams.IOStreams, getenv func(string) string) int {
	return run(ctx, &Env{IO: io, Getenv: getenv}, args)
}

func run(ctx context.Context, env *Env, args []string) int {
	root := NewRootCmd(env)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err != nil {
		var se *silentError
		if !errors.As(err, &se) && !errors.Is(err, errInvalid) {
			sayError(env, err)
		}
	}
	return ExitCode(err)
}

// sayError prints the error a command ended with: "cuecast: …" (and its
// hint) as text, or under --log-format json one record, so that stderr
// stays one JSON object per line when a command fails.
func sayError(env *Env, err error) {
	if env.LogFormat != "json" {
		fmt.Fprintf(env.IO.ErrOut, "cuecast: %v\n", err)
		return
	}
	msg, hint := err.Error(), ""
	var ue *UsageError
	if errors.As(err, &ue) && ue.Hint != "" {
		msg, hint = strings.Replace(msg, "\nhint: "+ue.Hint, "", 1), ue.Hint
	}
	attrs := []any{"err", msg, "exit", ExitCode(err)}
	if hint != "" {
		attrs = append(attrs, "hint", hint)
	}
	env.Logger().Error("cuecast: "+msg, attrs...)
}

// System runs cuecast as the process: real streams and environment.
func System(ctx context.Context) int {
	return Main(ctx, os.Args[1:], iostreams.System(), os.Getenv)
}
