package swarmmode

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/errdefs"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
)

// maxServiceName is Swarm's limit on a service name (a DNS label).
const maxServiceName = 63

// ServiceName is the service of sandbox sb made by the daemon instance: a
// readable prefix of the container's name and a hash of the instance, the
// swarm id and the name, at most 63 characters. Daemons sharing a cluster,
// and swarms of one daemon, never share a service, or the configs, secrets
// and network named after it.
func ServiceName(instance string, sb contract.Sandbox) string {
	name := sb.Container
	sum := sha256.Sum256([]byte(instance + "\x00" + sb.Swarm + "\x00" + name))
	suffix := "-" + hex.EncodeToString(sum[:])[:16]
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, name)
	if len(clean) > maxServiceName-len(suffix) {
		clean = clean[:maxServiceName-len(suffix)]
	}
	clean = strings.Trim(clean, "-")
	if clean == "" {
		clean = "aimi"
	}
	return clean + suffix
}

// legacyServiceName is the service name of a sandbox made before service
// names carried the instance and swarm: its spec names no service.
func legacyServiceName(name string) string {
	if len(name) <= maxServiceName && serviceNameRE.MatchString(name) {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, name)
	if len(clean) > 46 {
		clean = clean[:46]
	}
	return strings.Trim(clean, "-") + "-" + hex.EncodeToString(sum[:])[:16]
}

// objPrefix starts the name of every config, secret and network of the
// sandbox whose service is svc: Swarm object names are at most 64
// characters.
func objPrefix(svc string) string {
	sum := sha256.Sum256([]byte(svc))
	return "aimi-" + hex.EncodeToString(sum[:])[:20] + "-"
}

// objName names a sandbox's config, secret or network.
func objName(svc, kind string) string { return objPrefix(svc) + kind }

// owner is who an object belongs to: the instance, swarm and container its
// labels must carry before this engine touches it.
type owner struct {
	instance, swarmID, name string
}

// ownerOf reads the owner an object's labels claim.
func ownerOf(labels map[string]string) owner {
	return owner{labels[contract.LabelDaemon], labels[contract.LabelSwarmID], labels[contract.LabelContainer]}
}

// filter selects the objects carrying the owner's labels (an empty
// instance is a label the objects lack, which a filter cannot say: the
// caller checks owns on each).
func (o owner) filter() filters.Args {
	f := filters.NewArgs(filters.Arg("label", contract.LabelContainer+"="+o.name), filters.Arg("label", contract.LabelSwarmID+"="+o.swarmID))
	if o.instance != "" {
		f.Add("label", contract.LabelDaemon+"="+o.instance)
	}
	return f
}

// owns reports whether an object's labels name this owner.
func (o owner) owns(labels map[string]string) bool { return ownerOf(labels) == o }

// mine reports whether labels name this engine's instance.
func (e *Engine) mine(labels map[string]string) bool {
	return labels[contract.LabelDaemon] == e.opts.Instance
}

// service is the service a stored spec's sandbox has.
func (st storedSpec) service() string {
	if st.Service != "" {
		return st.Service
	}
	return legacyServiceName(st.Name)
}

// sandbox is a sandbox as found by its spec: its service and owner.
type sandbox struct {
	svc string
	own owner
}

// serviceOf resolves a sandbox id (from Create) or a container name to its
// service name and owner. Only this instance's sandboxes are found: one
// whose spec is gone or is another daemon's is container.ErrNotFound. Of
// several sandboxes of one name (of different swarms), the newest counts.
func (e *Engine) serviceOf(ctx context.Context, ref string) (sandbox, error) {
	if idRE.MatchString(ref) {
		cfg, _, err := e.cli.ConfigInspectWithRaw(ctx, "aimi-"+ref[:20]+"-"+objSpec)
		if errdefs.IsNotFound(err) {
			return sandbox{}, fmt.Errorf("sandbox %.12s: %w", ref, engine.ErrNotFound)
		}
		if err != nil {
			return sandbox{}, fmt.Errorf("read the spec of sandbox %.12s: %w", ref, err)
		}
		return e.sandboxOfSpec(cfg, ref)
	}
	f := filters.NewArgs(filters.Arg("label", contract.LabelContainer+"="+ref), filters.Arg("label", contract.LabelSwarmObject+"="+objSpec))
	if e.opts.Instance != "" {
		f.Add("label", contract.LabelDaemon+"="+e.opts.Instance)
	}
	cfgs, err := e.cli.ConfigList(ctx, swarm.ConfigListOptions{Filters: f})
	if err != nil {
		return sandbox{}, fmt.Errorf("find sandbox %s: list specs: %w", ref, err)
	}
	sort.Slice(cfgs, func(i, j int) bool { return cfgs[i].CreatedAt.After(cfgs[j].CreatedAt) })
	for _, c := range cfgs {
		if sb, err := e.sandboxOfSpec(c, ref); err == nil && sb.own.name == ref {
			return sb, nil
		}
	}
	return sandbox{}, fmt.Errorf("sandbox %s: %w", ref, engine.ErrNotFound)
}

// sandboxOfSpec reads a spec config, checking that it is this instance's
// and that its name is the one its sandbox's objects carry.
func (e *Engine) sandboxOfSpec(cfg swarm.Config, ref string) (sandbox, error) {
	if !e.mine(cfg.Spec.Labels) {
		return sandbox{}, fmt.Errorf("sandbox %.12s: %w (another daemon instance's)", ref, engine.ErrNotFound)
	}
	var st storedSpec
	if err := json.Unmarshal(cfg.Spec.Data, &st); err != nil {
		return sandbox{}, fmt.Errorf("read the spec of sandbox %.12s: %w", ref, err)
	}
	svc := st.service()
	own := ownerOf(cfg.Spec.Labels)
	if own.name != st.Name || cfg.Spec.Name != objName(svc, objSpec) {
		return sandbox{}, fmt.Errorf("sandbox %.12s: %w (its spec %s does not match its labels)", ref, engine.ErrNotFound, cfg.Spec.Name)
	}
	return sandbox{svc: svc, own: own}, nil
}

// inspectService reads a sandbox's service, which must carry the sandbox's
// labels: a service of that name that does not is treated as absent, never
// touched.
func (e *Engine) inspectService(ctx context.Context, sb sandbox) (swarm.Service, error) {
	s, _, err := e.cli.ServiceInspectWithRaw(ctx, sb.svc, swarm.ServiceInspectOptions{})
	if err != nil {
		return s, err
	}
	if !sb.own.owns(s.Spec.Labels) {
		return s, errdefs.NotFound(fmt.Errorf("service %s carries the labels of %+v, not of %+v", sb.svc, ownerOf(s.Spec.Labels), sb.own))
	}
	return s, nil
}

// isNotFound is the engine's not-found, or container.ErrNotFound.
func isNotFound(err error) bool {
	return errdefs.IsNotFound(err) || errors.Is(err, engine.ErrNotFound)
}
