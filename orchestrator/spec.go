package orchestrator

import (
	"maps"
	"slices"
	"strconv"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/land"
)

// createSpec builds the container spec of one task file.
func (sw *swarm) createSpec(c *ctr, g *Grant, mg *ModelGrant) engine.Spec {
	cfg := sw.m.cfg
	all := maps.Clone(cfg.RunnerEnv)
	if all == nil {
		all = map[string]string{}
	}
	if cfg.LandVerifyCommand != "" && land.IsLandRun(c.taskFile) {
		// A land's own run verifies with land.verify_command.
		all[contract.EnvVerifyCommand] = cfg.LandVerifyCommand
	}
	sw.attemptEnv(c, all)
	var mounts []engine.Mount
	caFile := ""
	if g != nil {
		all[contract.EnvGitToken] = g.Token
		if g.CAFile != "" {
			caFile = g.CAFile
			all[contract.EnvGitSSLCAInfo] = caMountPath
			all[contract.EnvDaemonGit] = "1"
		}
	}
	if mg != nil && len(mg.Env) > 0 {
		// The placeholders and base URLs win over anything of the same
		// name: a model key never reaches the sandbox.
		maps.Copy(all, mg.Env)
		if caFile == "" {
			caFile = mg.CAFile
		}
		all[contract.EnvNodeExtraCACerts] = caMountPath
		if mg.BundleFile != "" {
			// A whole trust store (the host's roots and the daemon's CA):
			// programs that read these replace their roots with it.
			all[contract.EnvSSLCertFile] = bundleMountPath
			all[contract.EnvRequestsCABundle] = bundleMountPath
			mounts = append(mounts, engine.Mount{Source: mg.BundleFile, Target: bundleMountPath, ReadOnly: true})
		}
	}
	if !sw.local && cfg.OriginCAFile != "" {
		// Origin's own CA, apart from the daemon's: the runner's relay
		// trusts only it for origin.
		all[contract.EnvGitSSLCAInfo] = originCAPath
		mounts = append(mounts, engine.Mount{Source: cfg.OriginCAFile, Target: originCAPath, ReadOnly: true})
	}
	if caFile != "" {
		// One CA signs the git service's and the gateway's certificates.
		mounts = append(mounts, engine.Mount{Source: caFile, Target: caMountPath, ReadOnly: true})
	}
	env := make([]string, 0, len(all))
	for _, k := range slices.Sorted(maps.Keys(all)) {
		env = append(env, k+"="+all[k])
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
		Scratch:         scratchPaths(cfg.ReadOnlyRoot, cfg.DiskBytes, contract.IsWorkspaceImage(sw.image)),
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
		BranchExists: c.branchExists,
	})
}

// envVars is the task-request's envVars: never null on the wire.
func envVars(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	maps.Copy(out, m)
	return out
}

// scratchPaths are the container directories that get a volume of their
// own. On a read-only root they are what must stay writable: the runner
// clones into its workspace, and git and agents write to the sandbox
// user's home (the sandbox image's layout; a project image that moves them
// sets AIMI_WORKSPACE and keeps /home/aimi or runs writable). On a writable
// root the workspace still gets one: a volume is the engine's own disk,
// where the writable layer may be a filesystem in user space
// (fuse-overlayfs: every file a round trip to its daemon; eight sandboxes
// unpacking their workspaces there took 250-540 ms each), unless a disk
// limit is set, which holds the writable layer only, or the image holds
// the workspace (a workspace image): a volume would be filled with a copy
// of it, where the writable layer is a copy-on-write view.
func scratchPaths(readOnlyRoot bool, diskBytes int64, prefilled bool) []string {
	switch {
	case readOnlyRoot:
		return []string{contract.DefaultWorkspace, "/home/aimi"}
	case diskBytes > 0, prefilled:
		return nil
	}
	return []string{contract.DefaultWorkspace}
}
