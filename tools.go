//go:build tools

// Package tools pins the modules the project builds on, so that go.mod and
// go.sum hold their full dependency graph before any package imports them.
package tools

import (
	_ "github.com/coder/acp-go-sdk"
	_ "github.com/docker/docker/api/types/container"
	_ "github.com/docker/docker/api/types/events"
	_ "github.com/docker/docker/api/types/filters"
	_ "github.com/docker/docker/api/types/image"
	_ "github.com/docker/docker/api/types/network"
	_ "github.com/docker/docker/client"
	_ "github.com/docker/docker/errdefs"
	_ "github.com/docker/docker/pkg/stdcopy"
	_ "github.com/go-playground/validator/v10"
	_ "github.com/google/uuid"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "github.com/spf13/cobra"
	_ "github.com/spf13/viper"
	_ "golang.org/x/sync/errgroup"
	_ "golang.org/x/sync/semaphore"
	_ "golang.org/x/sys/unix"
)
