package compiler

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/cuecast/cuecast"
)

// ErrNoModule is returned by Compile when the repo has no cue.mod/module.cue:
// it is not a CUE module, so cuecast cannot run on it at all.
var ErrNoModule = errors.New("no cue.mod/module.cue")

// NoModuleError is ErrNoModule as a diagnostic at cue.mod/module.cue, for a
// caller that reports it like any invalid config (exit 3, with a position)
// rather than as a failure to run.
func NoModuleError() Error {
	return Error{File: "cue.mod/module.cue", Line: 1, Column: 1, ID: IDManifestNoModule,
		Message: "no cue.mod/module.cue", Fix: "a config repo is a CUE module: add cue.mod/module.cue"}
}

// errTimeout is what bounded returns when an evaluation does not finish in
// time; callers turn it into a config/timeout Error.
var errTimeout = errors.New("evaluation timed out")

// Error is one problem found in the config repo: a CUE error (ID "cue") or a
// lint (ID like "secret/aws-access-key"). File is relative to the repo root and
// slash-separated; Line and Column are 1-based. Fix is a one-line hint.
type Error struct {
	Config  cuecast.ConfigPath `json:"config,omitempty"`
	File    string             `json:"file"`
	Line    int                `json:"line"`
	Column  int                `json:"column"`
	ID      string             `json:"id"`
	Message string             `json:"message"`
	Fix     string             `json:"fix,omitempty"`
}

// Error formats e the way compilers do: "file:line:col: message [ID]".
func (e Error) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s [%s]", e.File, e.Line, e.Column, e.Message, e.ID)
}

// compareErrors orders errors by file, line, column, then the rest so that
// the order never depends on which worker finished first.
func compareErrors(a, b Error) int {
	return cmp.Or(
		cmp.Compare(a.File, b.File),
		cmp.Compare(a.Line, b.Line),
		cmp.Compare(a.Column, b.Column),
		cmp.Compare(a.Config, b.Config),
		cmp.Compare(a.ID, b.ID),
		cmp.Compare(a.Message, b.Message),
	)
}

func sortErrors(errs []Error) []Error {
	slices.SortFunc(errs, compareErrors)
	return slices.CompactFunc(errs, func(a, b Error) bool { return compareErrors(a, b) == 0 })
}

// Lint and error IDs. They are stable: CI rules and suppressions name them.
const (
	IDCue                  = "cue"
	IDManifestMissing      = "manifest/missing"
	IDManifestNoModule     = "manifest/no-module"
	IDManifestSchema       = "manifest/unknown-schema"
	IDManifestDimensions   = "manifest/dimensions"
	IDManifestAnalysis     = "manifest/analysis"
	IDUnknownNamespace     = "manifest/unknown-namespace"
	IDConfigName           = "config/bad-name"
	IDConfigPackages       = "config/multiple-packages"
	IDConfigTimeout        = "config/timeout"
	IDVariantTag           = "config/variant-tag"
	IDDoubleDefault        = "config/two-defaults"
	IDCrossNamespaceImport = "config/cross-namespace-import"
	IDSizeConfig           = "size/config-too-large"
	IDFileNotUTF8          = "file/not-utf8"
	IDFileTooLarge         = "file/too-large"
	IDFileSymlinkEscape    = "file/symlink-escape"
	IDFileSymlinkDir       = "file/symlink-dir"
	IDFileSymlinkBroken    = "file/symlink-broken"
	IDSecretPrivateKey     = "secret/private-key"
	IDSecretAWSKey         = "secret/aws-access-key"
	IDSecretGitHubToken    = "secret/github-token"
	IDSecretJWT            = "secret/jwt"
	IDSecretHighEntropy    = "secret/high-entropy"
	IDLintAllowNoReason    = "lint/allow-without-reason"
	IDLintAllowUnknownID   = "lint/allow-unknown-id"
)

// IDs are every ID above, for what must list them all (the metrics export
// each at 0 before the first rejection); TestIDsListsEveryID keeps it
// complete.
func IDs() []string {
	return []string{
		IDCue, IDManifestMissing, IDManifestNoModule, IDManifestSchema, IDManifestDimensions, IDManifestAnalysis,
		IDUnknownNamespace, IDConfigName, IDConfigPackages, IDConfigTimeout, IDVariantTag, IDDoubleDefault,
		IDCrossNamespaceImport, IDSizeConfig, IDFileNotUTF8, IDFileTooLarge, IDFileSymlinkEscape, IDFileSymlinkDir,
		IDFileSymlinkBroken, IDSecretPrivateKey, IDSecretAWSKey, IDSecretGitHubToken, IDSecretJWT, IDSecretHighEntropy,
		IDLintAllowNoReason, IDLintAllowUnknownID,
	}
}

// fixFor returns the one-line hint shown with each lint ID; "" for CUE
// errors, whose messages already say what is wrong.
func fixFor(id string) string {
	switch id {
	case IDManifestMissing:
		return "add cuecast.cue at the repo root declaring your namespaces (see configs-example/cuecast.cue)"
	case IDManifestSchema:
		return `point schema at an existing definition, written "<import path>#<Definition>"`
	case IDManifestDimensions:
		return "give each dimension value to one dimension, and list combinations naming a declared value of every dimension (docs/VARIANTS.md)"
	case IDManifestAnalysis:
		return "fix the metric's query or comparison; docs/ROLLOUT.md, \"Analysis\", has a policy and queries to copy"
	case IDVariantTag:
		return "list every value of the dimension as a shorthand of its @tag, and select variants with the value alone (cue export -t prod), as cuecast does (docs/VARIANTS.md)"
	case IDDoubleDefault:
		return "keep the default in one layer and make the more specific layer concrete, or look the default up in a table keyed by the dimension (docs/VARIANTS.md)"
	case IDUnknownNamespace:
		return "declare the namespace under namespaces: in cuecast.cue, or move the config into a declared namespace"
	case IDConfigName:
		return "rename the directory to lower-case letters, digits, '_' and '-', starting with a letter or digit"
	case IDConfigPackages:
		return "keep one CUE package per config directory; move the other package to its own directory"
	case IDCrossNamespaceImport:
		return "move what both namespaces need into a library outside the namespaces, or add the namespace to import_configs_from in cuecast.cue"
	case IDConfigTimeout:
		return "simplify the evaluation (large comprehensions, deep recursion) so it finishes within the time limit"
	case IDSizeConfig:
		return "split the config, or raise max_size for the namespace in cuecast.cue"
	case IDFileNotUTF8:
		return "re-encode the file as UTF-8"
	case IDFileTooLarge:
		return "split the file; generated data this large belongs outside the config repo"
	case IDFileSymlinkEscape:
		return "replace the symlink with a file inside the repo"
	case IDFileSymlinkBroken:
		return "point the symlink at an existing file inside the repo, or remove it"
	case IDFileSymlinkDir:
		return "replace the symlinked directory with a real one, or import the package instead"
	case IDSecretPrivateKey:
		return "move the key to your secret store and reference it by name"
	case IDSecretAWSKey:
		return "move the key to your secret store and reference it by name"
	case IDSecretGitHubToken:
		return "revoke the token, move it to your secret store and reference it by name"
	case IDSecretJWT:
		return "move the token to your secret store and reference it by name"
	case IDSecretHighEntropy:
		return `move the value to your secret store, or mark the field @cuecast(allow="secret/high-entropy", reason="...") if it is not secret`
	case IDLintAllowNoReason:
		return `add reason="why this is safe" to the @cuecast(allow=...) attribute`
	case IDFlagInvalid:
		return "fix the flag as the message says (docs/FLAGS.md, Checks); every evaluator refuses a set with this error"
	case IDLintAllowUnknownID:
		return "name a secret lint ID such as secret/high-entropy, or \"secret\" for all of them"
	}
	return ""
}
