// Package configs owns aimi's configuration: the documented default file
// (aimi.yaml, embedded), the layering of the user's and the repository's files,
// AIMI_* environment variables and flags with viper, and the validation that
// turns raw values into a typed Config or an error naming the key and the fix.
// It does not know how the values are used, but for which of a repository's
// keys apply to one start (PrepareStart); the daemon maps a Config onto the
// orchestrator's settings.
//
// Precedence, strongest first: flags > AIMI_* environment >
// $XDG_CONFIG_HOME/aimi/config.yaml > <repo>/.aimi/config.yaml > aimi.yaml.
// The daemon loads the config once without a repository; each swarm start
// loads it again with that repository's .aimi/config.yaml as an extra layer
// (see LoadOptions.RepoPath). Of the repo's values, sandbox.image,
// swarm.max_containers and git.mode apply to that repo's swarms; the other
// keys are daemon-wide (PrepareStart warns when a repo file sets them). This
// also keeps a cloned repository's file from pulling the daemon's secrets
// into its containers: agent.env from a repo file is never used.
package configs
