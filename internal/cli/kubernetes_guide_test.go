package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// kubectlStandIn is what runs for kubectl: there is no cluster here, so it
// checks what a line can be checked for without one, that every file it
// names exists (--from-file, -k), and fails on anything else it is given.
const kubectlStandIn = `#!/usr/bin/env bash
set -eu
echo "kubectl $*"
case "$1 $2" in
"create secret"|"create configmap") ;;
"apply -k") [ -f "$3/kustomization.yaml" ] || { echo "kubectl: $3 has no kustomization.yaml" >&2; exit 1; }; exit 0 ;;
*) echo "kubectl stand-in: $1 $2 is not checked here" >&2; exit 1 ;;
esac
for a in "$@"; do
	case "$a" in
	--from-file=*)
		f=${a#--from-file=}; f=${f#*=}
		[ -s "$f" ] || { echo "kubectl: --from-file $f: no such file, or empty" >&2; exit 1; } ;;
	--from-literal=*=) echo "kubectl: $a is empty" >&2; exit 1 ;;
	esac
done
`

// TestKubernetesGuide runs docs/KUBERNETES.md's sh blocks as written, in
// order, in one bash from a directory standing for the root of a clone: the
// admin machine's block makes the secrets, certificates and keys, and every
// kubectl line then names files it made (a stand-in kubectl checks that,
// since no cluster runs here; the page says so). It caught the page asking
// for .creds files that its nats-config line (password mode) never wrote,
// a ca.pem in the wrong directory and a signing.nk nothing made, and a
// git-token that `> git-token` left readable by every user of the machine.
func TestKubernetesGuide(t *testing.T) {
	root := repoRoot(t)
	script := guideScript(t, "KUBERNETES.md")
	for _, want := range []string{"cuecast nats-config hub", "cuecast keys new", "kubectl create secret generic cuecast-nats", "kubectl apply -k deploy/kubernetes"} {
		if !strings.Contains(script, want) {
			t.Fatalf("docs/KUBERNETES.md's sh blocks no longer run %q; update TestKubernetesGuide", want)
		}
	}
	dir := t.TempDir()
	txtar := "exec bash kubernetes.sh\n" +
		"stdout 'kubectl create secret generic cuecast-serve'\n" +
		"stdout 'kubectl apply -k deploy/kubernetes'\n" +
		"stdout 'kubectl create secret generic cuecast-svc-payments'\n" +
		"exists signing.nk\n" +
		"grep '^A[A-Z0-9]{55}$' trusted-keys\n" +
		// The secrets the block leaves on the admin machine are its
		// user's alone, under the usual umask (the script's first line).
		"exec stat -c '%a %n' git-token signing.nk hub.conf host-17.conf\n" +
		"! stdout '^[0-9][1-7]'\n" +
		"stdout '^600 git-token$'\n" +
		"-- kubernetes.sh --\numask 022\nset -eux\n" + script
	if err := os.WriteFile(filepath.Join(dir, "kubernetes.txtar"), []byte(txtar), 0o644); err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir: dir,
		Setup: func(e *testscript.Env) error {
			e.Setenv("HOME", e.WorkDir)
			// The reader's own token for the config repository.
			e.Setenv("GIT_TOKEN", "github_pat_for_the_test")
			bin := filepath.Join(e.WorkDir, ".kubectl")
			if err := os.MkdirAll(bin, 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(bin, "kubectl"), []byte(kubectlStandIn), 0o755); err != nil {
				return err
			}
			e.Setenv("PATH", bin+string(os.PathListSeparator)+e.Getenv("PATH"))
			// The root of a clone, for -k deploy/kubernetes.
			return os.Symlink(filepath.Join(root, "deploy"), filepath.Join(e.WorkDir, "deploy"))
		},
	})
}
