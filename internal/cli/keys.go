package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nats-io/nkeys"
	"github.com/spf13/cobra"

	"github.com/cuecast/cuecast/distributor"
)

// KeysOptions are the flags of `cuecast keys` and its subcommands.
type KeysOptions struct {
	Data string
	// Out is where `keys new` writes the new seed.
	Out string
	// SigningKey is the seed serve signs with, which `keys retire` refuses to
	// retire.
	SigningKey string
	// Output (new, retire): text or json.
	Output string
}

// keysNewJSON is `keys new --output json`.
type keysNewJSON struct {
	PublicKey   string   `json:"public_key"`
	SeedFile    string   `json:"seed_file"`
	TrustedKeys string   `json:"trusted_keys_file"`
	Keys        []string `json:"keys"`
}

// keysRetireJSON is `keys retire --output json`.
type keysRetireJSON struct {
	Retired     string   `json:"retired"`
	TrustedKeys string   `json:"trusted_keys_file"`
	Keys        []string `json:"keys"`
}

func newKeysCmd(env *Env) *cobra.Command {
	opts := &KeysOptions{}
	cmd := &cobra.Command{
		Use:   "keys [--data DIR]",
		Short: "Print the public keys services must trust; create and retire signing keys",
		Long: `Keys prints the public keys in serve's trusted-keys file (<data>/trusted-keys), one
per line with a comment header: the file services are given, as
--trusted-keys-file for watch and agent or client.WithTrustedKeysFile in Go. serve
writes it on every start, adding its signing key's public half. Services refuse to
start without trusted keys.

Run it on the serve host, and copy the output to the services by the same means as
their other configuration: it is not read over NATS, since whoever could forge
content on NATS could then forge the keys too.

Rotating the signing key (docs/OPERATIONS.md, "Rotating the signing key"):
  cuecast keys new      create the next seed and trust its public key beside the old
  cuecast keys retire   stop trusting the old public key once nothing needs it`,
		Example: `  cuecast keys --data /var/lib/cuecast > trusted-keys
  cuecast watch --config payments/checkout --instance web-1 --trusted-keys-file trusted-keys`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			path := filepath.Join(opts.Data, distributor.TrustedKeysFile)
			keys, err := distributor.ReadTrustedKeys(path)
			if errors.Is(err, os.ErrNotExist) {
				return usageErrorf("start `cuecast serve --data DIR` once, or pass the --data serve uses", "no %s", path)
			}
			if err != nil {
				return err
			}
			if len(keys) == 0 {
				return fmt.Errorf("%s lists no key: start `cuecast serve --data %s` to add its signing key", path, opts.Data)
			}
			fmt.Fprintf(env.IO.Out, "# Public keys that verify what cuecast serve signs (from %s).\n", path)
			for _, k := range keys {
				fmt.Fprintln(env.IO.Out, k)
			}
			return nil
		},
	}
	cmd.PersistentFlags().StringVar(&opts.Data, "data", ".cuecast", "serve's data directory")

	newCmd := &cobra.Command{
		Use:   "new [--data DIR] [--out FILE]",
		Short: "Create the next signing key and trust it beside the current one",
		Long: `New creates an ed25519 signing seed (mode 0600) at --out (default
<data>/signing.next.nk) and adds its public key to <data>/trusted-keys, which then
lists the current and the next key. serve keeps signing with the current key until
it is restarted with --signing-key naming the new seed. Give the updated
trusted-keys file to every service before that restart.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if err := validateOutput(opts.Output, "text", "json"); err != nil {
				return err
			}
			out := opts.Out
			if out == "" {
				out = filepath.Join(opts.Data, "signing.next.nk")
			}
			if _, err := os.Stat(out); err == nil {
				return usageErrorf("pass another --out, or remove it if it is an unused earlier attempt", "%s exists", out)
			}
			kp, _, err := distributor.LoadOrCreateKey(out)
			if err != nil {
				return err
			}
			pub, err := kp.PublicKey()
			if err != nil {
				return fmt.Errorf("keys new: %w", err)
			}
			path := filepath.Join(opts.Data, distributor.TrustedKeysFile)
			keys, err := distributor.TrustKey(path, pub)
			if err != nil {
				return err
			}
			fmt.Fprintf(env.IO.ErrOut, "cuecast keys: new seed in %s; %s now lists %s. Give it to every service, then restart serve with --signing-key %s\n",
				out, path, count(len(keys), "key"), out)
			if opts.Output == "json" {
				return writeJSON(env.IO.Out, keysNewJSON{PublicKey: pub, SeedFile: out, TrustedKeys: path, Keys: keys})
			}
			fmt.Fprintln(env.IO.Out, pub)
			return nil
		},
	}
	newCmd.Flags().StringVar(&opts.Out, "out", "", "file for the new seed (default <data>/signing.next.nk)")

	retireCmd := &cobra.Command{
		Use:   "retire PUBLIC-KEY [--data DIR]",
		Short: "Stop trusting a public key",
		Long: `Retire removes a public key from <data>/trusted-keys. Give the updated file to every
service afterwards: from then on they refuse what that key signed. It refuses the
key serve signs with (--signing-key, default <data>/signing.nk) and the last key; a
--signing-key it cannot read as a seed is refused too, since it could not check it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := validateOutput(opts.Output, "text", "json"); err != nil {
				return err
			}
			pub := args[0]
			if _, err := nkeys.FromPublicKey(pub); err != nil {
				return usageErrorf("pass a public key as `cuecast keys` prints it", "%q: not a public key: %v", pub, err)
			}
			seedPath := opts.SigningKey
			if seedPath == "" {
				seedPath = filepath.Join(opts.Data, "signing.nk")
			}
			// The refusal of serve's key is only as good as the seed read:
			// one that cannot be read (a typo, another user's 0600 file) or
			// is no seed stops here, or serve's key would go unchecked. Only
			// the default may be missing (serve's seed is elsewhere).
			seed, err := os.ReadFile(seedPath)
			switch {
			case err != nil && opts.SigningKey == "" && errors.Is(err, os.ErrNotExist):
			case err != nil:
				return usageErrorf("pass --signing-key naming the seed serve signs with, readable by you", "read the seed serve signs with, to refuse its key: %w", err)
			default:
				kp, err := nkeys.FromSeed(trimSeed(seed))
				if err != nil {
					return usageErrorf("pass --signing-key naming the seed serve signs with", "%s is not a signing seed: %v", seedPath, err)
				}
				if cur, _ := kp.PublicKey(); cur == pub {
					return usageErrorf("restart serve with --signing-key naming the new seed first", "%s is the key in %s, which serve signs with", pub, seedPath)
				}
			}
			path := filepath.Join(opts.Data, distributor.TrustedKeysFile)
			keys, err := distributor.RetireKey(path, pub)
			switch {
			case errors.Is(err, distributor.ErrLastKey):
				return &UsageError{Err: err, Hint: "add the next key first: cuecast keys new"}
			case errors.Is(err, distributor.ErrNotListed):
				return &UsageError{Err: err, Hint: "it may be retired already (nothing to do); otherwise name a key `cuecast keys --data " + opts.Data + "` prints"}
			case errors.Is(err, os.ErrNotExist):
				return usageErrorf("pass the --data serve uses; serve writes the file on its first start", "no %s", path)
			case err != nil:
				return err
			}
			fmt.Fprintf(env.IO.ErrOut, "cuecast keys: retired %s; %s left. Give the file to every service.\n", pub, count(len(keys), "key"))
			if opts.Output == "json" {
				return writeJSON(env.IO.Out, keysRetireJSON{Retired: pub, TrustedKeys: path, Keys: keys})
			}
			return nil
		},
	}
	retireCmd.Flags().StringVar(&opts.SigningKey, "signing-key", "", "the seed serve signs with (default <data>/signing.nk)")

	for _, sub := range []*cobra.Command{newCmd, retireCmd} {
		sub.Flags().StringVarP(&opts.Output, "output", "o", "text", "output format: text or json")
	}
	cmd.AddCommand(newCmd, retireCmd)
	return cmd
}

// trimSeed drops the whitespace around a seed read from a file.
func trimSeed(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}
