package kubernetes_test

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/iostreams"
)

// kustomization is the part of kustomize's file format the base uses.
type kustomization struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Labels     []struct {
		Pairs            map[string]string `json:"pairs"`
		IncludeSelectors bool              `json:"includeSelectors"`
	} `json:"labels"`
	Resources []string `json:"resources"`
}

type object struct {
	file string
	kind string
	obj  any
}

// decodeFile decodes every document of a manifest into its API type,
// refusing unknown fields as the API server's strict field validation does.
func decodeFile(t *testing.T, path string) []object {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, path, src)
}

func decode(t *testing.T, path string, src []byte) []object {
	t.Helper()
	var objs []object
	for i, doc := range bytes.Split(src, []byte("\n---\n")) {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatalf("%s document %d: %v", path, i+1, err)
		}
		var obj any
		switch head.APIVersion + " " + head.Kind {
		case "apps/v1 StatefulSet":
			obj = &appsv1.StatefulSet{}
		case "apps/v1 Deployment":
			obj = &appsv1.Deployment{}
		case "v1 Service":
			obj = &corev1.Service{}
		case "v1 ServiceAccount":
			obj = &corev1.ServiceAccount{}
		default:
			t.Fatalf("%s document %d: %s %s is not a kind these tests know; add it", path, i+1, head.APIVersion, head.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Fatalf("%s document %d (%s): %v", path, i+1, head.Kind, err)
		}
		objs = append(objs, object{file: path, kind: head.Kind, obj: obj})
	}
	return objs
}

// render builds the base with kustomize's own library, as
// `kubectl apply -k deploy/kubernetes` does.
func render(t *testing.T) []byte {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), ".")
	if err != nil {
		t.Fatalf("kustomize build: %v", err)
	}
	out, err := res.AsYaml()
	if err != nil {
		t.Fatalf("kustomize build: %v", err)
	}
	return out
}

func readBase(t *testing.T) (kustomization, []object) {
	t.Helper()
	src, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(src, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Errorf("kustomization.yaml is %s %s, want kustomize.config.k8s.io/v1beta1 Kustomization", k.APIVersion, k.Kind)
	}
	objs := decode(t, "kustomize build", render(t))
	if len(objs) != len(k.Resources) {
		t.Errorf("kustomize build gave %d objects from %d resources", len(objs), len(k.Resources))
	}
	// Every manifest beside the kustomization is part of the base.
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f != "kustomization.yaml" && !slices.Contains(k.Resources, f) {
			t.Errorf("%s is not listed in kustomization.yaml's resources", f)
		}
	}
	return k, objs
}

func find[T any](t *testing.T, objs []object) T {
	t.Helper()
	for _, o := range objs {
		if v, ok := o.obj.(T); ok {
			return v
		}
	}
	var zero T
	t.Fatalf("no %T among the manifests", zero)
	return zero
}

var varRef = regexp.MustCompile(`\$\(([A-Z_]+)\)`)

// accepts runs cuecast's own command tree on a container's arguments (with
// Kubernetes' $(VAR) references expanded to plausible values) and --help, so
// a misspelt or removed flag fails here rather than in a crash-looping pod.
func accepts(t *testing.T, c corev1.Container) {
	t.Helper()
	defined := map[string]bool{}
	for _, e := range c.Env {
		defined[e.Name] = true
	}
	var args []string
	for _, a := range c.Args {
		for _, m := range varRef.FindAllStringSubmatch(a, -1) {
			if !defined[m[1]] {
				t.Errorf("container %s: argument %q refers to $(%s), which its env does not define", c.Name, a, m[1])
			}
		}
		args = append(args, varRef.ReplaceAllString(a, "pod-1"))
	}
	io, out, errOut := iostreams.Test()
	code := cli.Main(context.Background(), append(args, "--help"), io, func(string) string { return "" })
	if code != 0 {
		t.Errorf("container %s: cuecast %s: exit %d\n%s%s", c.Name, strings.Join(args, " "), code, out, errOut)
	}
}

func TestServeStatefulSet(t *testing.T) {
	k, objs := readBase(t)
	sts := find[*appsv1.StatefulSet](t, objs)
	svc := find[*corev1.Service](t, objs)
	sa := find[*corev1.ServiceAccount](t, objs)
	pod := sts.Spec.Template

	for key, want := range sts.Spec.Selector.MatchLabels {
		if pod.Labels[key] != want {
			t.Errorf("the StatefulSet's selector %s=%s does not match its pod labels %v", key, want, pod.Labels)
		}
	}
	for key, want := range svc.Spec.Selector {
		if pod.Labels[key] != want {
			t.Errorf("the Service's selector %s=%s does not match the pod labels %v", key, want, pod.Labels)
		}
	}
	for key, want := range k.Labels[0].Pairs {
		if sts.Labels[key] != want || svc.Labels[key] != want {
			t.Errorf("rendered objects lack the kustomization's label %s=%s: %v, %v", key, want, sts.Labels, svc.Labels)
		}
	}
	for _, l := range k.Labels {
		if l.IncludeSelectors {
			t.Error("kustomization labels must not include selectors: a StatefulSet's selector cannot change after creation")
		}
	}
	if pod.Spec.ServiceAccountName != sa.Name {
		t.Errorf("pods run as service account %q, want %q", pod.Spec.ServiceAccountName, sa.Name)
	}
	if sc := pod.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("serve's pod must run as non-root")
	}

	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("got %d containers, want serve alone", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Fatalf("container args %v, want serve …", c.Args)
	}
	accepts(t, c)
	flags := flagsOf(c)
	httpPort := portOf(t, flags["http"])
	var named int32
	for _, p := range c.Ports {
		if p.Name == "http" {
			named = p.ContainerPort
		}
	}
	if named != httpPort {
		t.Errorf("container port http is %d, want serve's --http port %d", named, httpPort)
	}
	for probe, want := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want || probe.HTTPGet.Port.String() != "http" {
			t.Errorf("probe %+v, want GET %s on port http", probe, want)
		}
	}
	if c.Resources.Requests.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want CPU and memory requests and a memory limit", c.Resources)
	}

	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	if m, ok := mounts[flags["data"]]; !ok || !slices.ContainsFunc(sts.Spec.VolumeClaimTemplates, func(p corev1.PersistentVolumeClaim) bool { return p.Name == m.Name }) {
		t.Errorf("--data %s is not on a persistent volume claim", flags["data"])
	}
	for _, f := range []string{"creds", "tls-ca", "git-token-file"} {
		if !mountedFromSecret(pod.Spec, c, flags[f]) {
			t.Errorf("--%s %s is not a file mounted from a Secret", f, flags[f])
		}
	}
	if !mountedFromSecret(pod.Spec, c, flags["signing-key"]) {
		t.Error("the signing key is not mounted from a Secret: replicas must share it")
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			t.Errorf("env %s is not from a Secret", e.Name)
		}
	}
}

func TestAgentSidecarExample(t *testing.T) {
	objs := decodeFile(t, filepath.Join("agent-example", "deployment.yaml"))
	d := find[*appsv1.Deployment](t, objs)
	var agent *corev1.Container
	for i, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "cuecast-agent" {
			agent = &d.Spec.Template.Spec.Containers[i]
		}
	}
	if agent == nil {
		t.Fatal("no container named cuecast-agent")
	}
	if len(agent.Args) == 0 || agent.Args[0] != "agent" {
		t.Fatalf("agent args %v, want agent …", agent.Args)
	}
	accepts(t, *agent)
	// Service credentials from nats-config read only their namespace's
	// mirror: without --namespace-mirror the agent gets permission errors
	// and writes nothing (issue 33, item 12).
	if slices.ContainsFunc(agent.Args, func(a string) bool { return strings.HasPrefix(a, "--creds=") }) &&
		!slices.Contains(agent.Args, "--namespace-mirror") {
		t.Errorf("agent args %v: service credentials need --namespace-mirror", agent.Args)
	}
	// The agent dials the node servers' Service, which must keep a pod's
	// connections on its own node (internalTrafficPolicy: Local).
	u, err := url.Parse(flagsOf(*agent)["nats"])
	if err != nil {
		t.Fatalf("agent --nats: %v", err)
	}
	if name, ns, ok := strings.Cut(strings.TrimSuffix(u.Hostname(), ".svc"), "."); ok {
		svc := find[*corev1.Service](t, decodeFile(t, filepath.Join("agent-example", "node-nats-service.yaml")))
		if svc.Name != name || svc.Namespace != ns {
			t.Errorf("the agent dials %s, but node-nats-service.yaml is Service %s in namespace %s", u.Host, svc.Name, svc.Namespace)
		}
		if p := svc.Spec.InternalTrafficPolicy; p == nil || *p != corev1.ServiceInternalTrafficPolicyLocal {
			t.Error("Service cuecast-node: internalTrafficPolicy must be Local, so an agent reaches the server on its own node")
		}
		if len(svc.Spec.Ports) != 1 || fmt.Sprint(svc.Spec.Ports[0].Port) != u.Port() {
			t.Errorf("Service cuecast-node ports %v, want the agent's port %s", svc.Spec.Ports, u.Port())
		}
	} else {
		t.Errorf("the agent dials %s, want the node servers' Service <name>.<namespace>.svc", u.Host)
	}
	volumes := map[string]bool{}
	for _, v := range d.Spec.Template.Spec.Volumes {
		volumes[v.Name] = true
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, m := range c.VolumeMounts {
			if !volumes[m.Name] {
				t.Errorf("container %s mounts volume %q, which the pod does not define", c.Name, m.Name)
			}
		}
	}
}

// flagsOf is a container's cuecast flags, written --name=value in the
// manifests.
func flagsOf(c corev1.Container) map[string]string {
	flags := map[string]string{}
	for _, a := range c.Args[1:] {
		name, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		flags[name] = value
	}
	return flags
}

func portOf(t *testing.T, addr string) int32 {
	t.Helper()
	_, port, ok := strings.Cut(addr, ":")
	var n int32
	if _, err := fmt.Sscan(port, &n); !ok || err != nil {
		t.Fatalf("address %q has no port", addr)
	}
	return n
}

// mountedFromSecret says whether path is inside a volume mount of c whose
// volume is a Secret.
func mountedFromSecret(pod corev1.PodSpec, c corev1.Container, path string) bool {
	for _, m := range c.VolumeMounts {
		if path != m.MountPath && !strings.HasPrefix(path, m.MountPath+"/") {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				return true
			}
		}
	}
	return false
}

// TestImagesAreTheDockerfilesBuild: no cuecast image is published, so the
// manifests name the one the Dockerfile's documented build makes, and that
// build passes the commit (without it the pod's version says "unknown").
// The Dockerfile exposes only what a container serves by default: the
// embedded NATS server listens on loopback unless told --secure.
func TestImagesAreTheDockerfilesBuild(t *testing.T) {
	dockerfile, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	const image = "cuecast:devel"
	df := string(dockerfile)
	if !strings.Contains(df, "docker build -t "+image+" ") || !strings.Contains(df, "--build-arg COMMIT=$(git rev-parse HEAD)") ||
		!strings.Contains(df, "--build-arg DATE=") {
		t.Errorf("the Dockerfile's build line should tag %s and pass VERSION, COMMIT and DATE", image)
	}
	for _, l := range strings.Split(df, "\n") {
		if strings.HasPrefix(l, "EXPOSE ") && strings.Contains(l, "4222") {
			t.Errorf("%s: the embedded NATS server listens on loopback by default", l)
		}
	}
	_, objs := readBase(t)
	sts := find[*appsv1.StatefulSet](t, objs)
	agent := find[*appsv1.Deployment](t, decodeFile(t, filepath.Join("agent-example", "deployment.yaml")))
	for _, c := range append(sts.Spec.Template.Spec.Containers, agent.Spec.Template.Spec.Containers...) {
		if strings.Contains(c.Image, "cuecast") && c.Image != image {
			t.Errorf("container %s runs %s, which nothing builds; want %s (the Dockerfile's)", c.Name, c.Image, image)
		}
	}
}

// guide is what docs/KUBERNETES.md's sh blocks (the lines a reader runs, and
// TestKubernetesGuide in internal/cli runs) make, as the lines write it.
type guide struct {
	// certs: certificate file ("$T/hub.pem") → the names `nats-config
	// cert --host` put in it, and the CA that signed it ("$T/ca.pem").
	certHosts map[string][]string
	certCA    map[string]string
	// levels: nats-config level (hub, leaf, node) → its --tls-cert, ""
	// for a level generated without TLS.
	levels map[string]string
	// secrets: Secret name → key → the file `kubectl create secret
	// --from-file` puts there.
	secrets map[string]map[string]string
}

func readGuide(t *testing.T) guide {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "docs", "KUBERNETES.md"))
	if err != nil {
		t.Fatal(err)
	}
	g := guide{certHosts: map[string][]string{}, certCA: map[string]string{}, levels: map[string]string{}, secrets: map[string]map[string]string{}}
	for _, w := range guideCommands(string(src)) {
		switch {
		case len(w) > 3 && w[0] == "cuecast" && w[1] == "nats-config" && w[2] == "cert":
			dir, name := flagValues(w, "dir"), flagValues(w, "name")
			if len(dir) != 1 || len(name) != 1 {
				t.Fatalf("docs/KUBERNETES.md: %s: want one --dir and one --name", strings.Join(w, " "))
			}
			cert := dir[0] + "/" + name[0] + ".pem"
			g.certHosts[cert] = flagValues(w, "host")
			g.certCA[cert] = dir[0] + "/ca.pem"
		case len(w) > 3 && w[0] == "cuecast" && w[1] == "nats-config" && slices.Contains([]string{"hub", "leaf", "node"}, w[2]):
			g.levels[w[2]] = strings.Join(flagValues(w, "tls-cert"), "")
		case len(w) > 4 && w[0] == "kubectl" && w[1] == "create" && w[2] == "secret" && w[3] == "generic":
			keys := map[string]string{}
			for _, f := range flagValues(w, "from-file") {
				key, file, ok := strings.Cut(f, "=")
				if !ok {
					key, file = filepath.Base(f), f
				}
				keys[key] = file
			}
			g.secrets[w[4]] = keys
		}
	}
	return g
}

// guideCommands is the command lines of a guide's ```sh blocks, continued
// lines joined, each split into words (quoted words with spaces are split
// too, which none of the words looked at has).
func guideCommands(doc string) [][]string {
	var cmds [][]string
	in, line := false, ""
	for _, l := range strings.Split(doc, "\n") {
		switch {
		case !in:
			in = l == "```sh"
		case l == "```":
			in = false
		case strings.HasSuffix(l, "\\"):
			line += strings.TrimSuffix(l, "\\") + " "
		default:
			if w := strings.Fields(line + l); len(w) > 0 {
				cmds = append(cmds, w)
			}
			line = ""
		}
	}
	return cmds
}

// flagValues is every value of --name in a command's words, as --name value
// or --name=value.
func flagValues(words []string, name string) []string {
	var vs []string
	for i, w := range words {
		if v, ok := strings.CutPrefix(w, "--"+name+"="); ok {
			vs = append(vs, v)
		} else if w == "--"+name && i+1 < len(words) {
			vs = append(vs, words[i+1])
		}
	}
	return vs
}

// secretFile is the Secret and key that the file at path in container c
// comes from, if a Secret volume mounted in c provides it.
func secretFile(pod corev1.PodSpec, c corev1.Container, path string) (secret, key string, ok bool) {
	for _, m := range c.VolumeMounts {
		rel, found := strings.CutPrefix(path, m.MountPath+"/")
		if !found || m.SubPath != "" {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			if len(v.Secret.Items) == 0 {
				return v.Secret.SecretName, rel, true
			}
			for _, it := range v.Secret.Items {
				if it.Path == rel {
					return v.Secret.SecretName, it.Key, true
				}
			}
		}
	}
	return "", "", false
}

// checkConnects: a container that connects to a level of the tree the guide
// builds can, as the guide sets it up. When the guide generates that level
// with a certificate, the server requires TLS (nats-config writes a
// top-level tls block), so the container must dial tls:// a name that
// certificate carries (a $(VAR) host, like the node's IP, is none of the
// fixed names of a certificate made on the admin machine), and verify it
// with --tls-ca: a file a Secret volume provides, which the guide's
// `kubectl create secret` line puts in that Secret from the CA that signed
// the certificate. An agent without it loops on "not connected" and writes
// nothing.
func checkConnects(t *testing.T, g guide, pod corev1.PodSpec, c corev1.Container, level string) {
	t.Helper()
	cert, ok := g.levels[level]
	if !ok {
		// Step 1: one --secrets and --tls-* set for every level.
		if cert, ok = g.levels["hub"]; !ok {
			t.Fatal("docs/KUBERNETES.md generates no `nats-config hub` configuration")
		}
	}
	if cert == "" {
		return
	}
	flags := flagsOf(c)
	u, err := url.Parse(flags["nats"])
	if err != nil || u.Scheme != "tls" {
		t.Errorf("container %s: --nats %q: the guide's %s server requires TLS; want tls://", c.Name, flags["nats"], level)
	}
	if u != nil && !slices.Contains(g.certHosts[cert], u.Hostname()) {
		t.Errorf("container %s dials %q, which the %s server's certificate %s does not name (the guide's `nats-config cert` gives it %v)", c.Name, u.Hostname(), level, cert, g.certHosts[cert])
	}
	ca, ok := flags["tls-ca"]
	if !ok {
		t.Errorf("container %s: no --tls-ca to verify the %s server's certificate with", c.Name, level)
		return
	}
	secret, key, ok := secretFile(pod, c, ca)
	if !ok {
		t.Errorf("container %s: --tls-ca %s is not a file mounted from a Secret", c.Name, ca)
		return
	}
	if got, want := g.secrets[secret][key], g.certCA[cert]; got != want {
		t.Errorf("container %s: --tls-ca %s is key %s of Secret %s, which docs/KUBERNETES.md's `kubectl create secret` line fills from %q, want %s (the CA that signed %s)", c.Name, ca, key, secret, got, want, cert)
	}
}

// TestContainersConnectAsTheGuideSetsUp: serve connects to the hub (the
// chart's Service nats.nats.svc), the agent to the node server on its own
// node (docs/KUBERNETES.md, step 4).
func TestContainersConnectAsTheGuideSetsUp(t *testing.T) {
	g := readGuide(t)
	_, objs := readBase(t)
	sts := find[*appsv1.StatefulSet](t, objs)
	for _, c := range sts.Spec.Template.Spec.Containers {
		checkConnects(t, g, sts.Spec.Template.Spec, c, "hub")
	}
	d := find[*appsv1.Deployment](t, decodeFile(t, filepath.Join("agent-example", "deployment.yaml")))
	n := 0
	for _, c := range d.Spec.Template.Spec.Containers {
		if len(c.Args) > 0 && (c.Args[0] == "agent" || c.Args[0] == "watch") {
			checkConnects(t, g, d.Spec.Template.Spec, c, "node")
			n++
		}
	}
	if n == 0 {
		t.Error("agent-example runs no cuecast agent")
	}
}

// TestSecretVolumesAreReadable: a container not running as root must be able
// to read the Secret, projected and ConfigMap files mounted into it. The
// kubelet writes those files owned by root (uid 0, gid 0) with the volume's
// mode (items[].mode, else defaultMode, else 0644), so a non-root user reads
// them only through the "others" bits, unless the pod sets fsGroup: then, as
// PodSecurityContext.fsGroup's API documentation says, the files' owning
// GID is the fsGroup, their permission bits are OR'd with rw-rw---- (r--r-----
// for these read-only volumes) and every container gets the group as a
// supplementary group. So the rule checked is: the pod sets fsGroup, or the
// mode grants others read. (A container whose group is 0 could read a
// group-readable file without fsGroup; no manifest here relies on that.) A
// container counts as root only if runAsUser, its own or else the pod's, is
// 0: without one, cuecast's image runs as its USER 65532 (Dockerfile).
func TestSecretVolumesAreReadable(t *testing.T) {
	_, objs := readBase(t)
	sts := find[*appsv1.StatefulSet](t, objs)
	d := find[*appsv1.Deployment](t, decodeFile(t, filepath.Join("agent-example", "deployment.yaml")))
	for name, pod := range map[string]corev1.PodSpec{"StatefulSet " + sts.Name: sts.Spec.Template.Spec, "Deployment " + d.Name: d.Spec.Template.Spec} {
		if pod.SecurityContext != nil && pod.SecurityContext.FSGroup != nil {
			continue
		}
		for _, c := range pod.Containers {
			uid := (*int64)(nil)
			if pod.SecurityContext != nil {
				uid = pod.SecurityContext.RunAsUser
			}
			if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
				uid = c.SecurityContext.RunAsUser
			}
			if uid != nil && *uid == 0 {
				continue
			}
			for _, m := range c.VolumeMounts {
				for _, v := range pod.Volumes {
					if v.Name != m.Name {
						continue
					}
					for _, mode := range fileModes(v) {
						if mode&0o004 == 0 {
							t.Errorf("%s: container %s (uid %v) cannot read the files of volume %s (mode %#o, owned by root): set the pod's fsGroup", name, c.Name, uidString(uid), v.Name, mode)
						}
					}
				}
			}
		}
	}
}

func uidString(uid *int64) string {
	if uid == nil {
		return "the image's"
	}
	return fmt.Sprint(*uid)
}

// fileModes is the modes the kubelet gives the files of a Secret, ConfigMap
// or projected volume (the API's default mode is 0644); none for other
// volumes.
func fileModes(v corev1.Volume) []int32 {
	mode := func(m *int32) int32 {
		if m == nil {
			return 0o644
		}
		return *m
	}
	var modes []int32
	add := func(def *int32, items []corev1.KeyToPath) {
		modes = append(modes, mode(def))
		for _, it := range items {
			if it.Mode != nil {
				modes = append(modes, *it.Mode)
			}
		}
	}
	switch {
	case v.Secret != nil:
		add(v.Secret.DefaultMode, v.Secret.Items)
	case v.ConfigMap != nil:
		add(v.ConfigMap.DefaultMode, v.ConfigMap.Items)
	case v.Projected != nil:
		for _, s := range v.Projected.Sources {
			switch {
			case s.Secret != nil:
				add(v.Projected.DefaultMode, s.Secret.Items)
			case s.ConfigMap != nil:
				add(v.Projected.DefaultMode, s.ConfigMap.Items)
			default:
				modes = append(modes, mode(v.Projected.DefaultMode))
			}
		}
	}
	return modes
}
