package orchestrator

import (
	"maps"
	"slices"
	"strconv"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
)

// createSpec builds the container spec of one task file.
func (sw *swarm) createSpec(c *ctr, g *Grant) engine.Spec {
	cfg := sw.m.cfg
	env := make([]string, 0, len(cfg.RunnerEnv)+4)
	for _, k := range slices.Sorted(maps.Keys(cfg.RunnerEnv)) {
		env = append(env, k+"="+cfg.RunnerEnv[k])
	}
	var mounts []engine.Mount
	if g != nil {
		env = append(env, contract.EnvGitToken+"="+g.Token)
		if g.CAFile != "" {
			// Only git is pointed at the service's CA. SSL_CERT_FILE would
			// replace the image's whole trust store for OpenSSL, Go and rustls
			// programs, and agents could no longer reach their model APIs.
			env = append(env, contract.EnvGitSSLCAInfo+"="+caMountPath)
			mounts = append(mounts, engine.Mount{Source: g.CAFile, Target: caMountPath, ReadOnly: true})
		}
	}
	return engine.Spec{
		Name:  c.name,
		Image: sw.image,
		Labels: sw.m.selector(map[string]string{
			contract.LabelSwarmID:       sw.id,
			contract.LabelTaskFile:      c.taskFile,
			contract.LabelProject:       sw.repo,
			contract.LabelRepoID:        sw.repoID,
			contract.LabelMaxContainers: strconv.Itoa(sw.max),
			contract.LabelGitMode:       map[bool]string{true: "local", false: "remote"}[sw.local],
			contract.LabelBranch:        c.branch,
			contract.LabelRepoURL:       c.repoURL,
		}),
		Env:             env,
		NanoCPUs:        int64(cfg.CPUs * 1e9),
		MemoryBytes:     cfg.MemoryBytes,
		MemorySwapBytes: cfg.MemorySwapBytes,
		PidsLimit:       cfg.PidsLimit,
		DiskBytes:       cfg.DiskBytes,
		ReadOnlyRootfs:  cfg.ReadOnlyRoot,
		Scratch:         scratchPaths(cfg.ReadOnlyRoot),
		Runtime:         cfg.Runtime,
		RequireRuntime:  cfg.RequireRuntime,
		Network:         sw.network,
		Mounts:          mounts,
	}
}

// taskRequest is the line written to a container's stdin.
func (sw *swarm) taskRequest(c *ctr) acpmsg.Message {
	return acpmsg.NewMessage(acpmsg.TypeTaskRequest, sw.id, c.id, &acpmsg.TaskRequest{
		TaskFilePath: c.taskFile,
		BranchName:   c.branch,
		RepoURL:      c.repoURL,
		EnvVars:      envVars(sw.m.cfg.EnvVars),
	})
}

// envVars is the task-request's envVars: never null on the wire.
func envVars(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	maps.Copy(out, m)
	return out
}

// scratchPaths are the directories that must stay writable on a read-only
// root: the runner clones into its workspace, and git and agents write to
// the sandbox user's home (the sandbox image's layout; a project image that
// moves them sets AIMI_WORKSPACE and keeps /home/aimi or runs writable).
func scratchPaths(readOnlyRoot bool) []string {
	if !readOnlyRoot {
		return nil
	}
	return []string{"/workspace", "/home/aimi"}
}
