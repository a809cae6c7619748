package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"time"

	"github.com/aimi-tools/swarm/gitref"
)

// ContainerStatus is a container entry's status in swarm-state.json.
type ContainerStatus string

// The five container statuses of the schema.
const (
	StatusPending   ContainerStatus = "pending"
	StatusRunning   ContainerStatus = "running"
	StatusCompleted ContainerStatus = "completed"
	StatusFailed    ContainerStatus = "failed"
	StatusStopped   ContainerStatus = "stopped"
)

// Terminal reports whether nothing moves a container out of the status.
func (s ContainerStatus) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusStopped
}

func (s ContainerStatus) valid() bool {
	switch s {
	case StatusPending, StatusRunning, StatusCompleted, StatusFailed, StatusStopped:
		return true
	}
	return false
}

// Swarm is the whole of swarm-state.json.
type Swarm struct {
	SwarmID    string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	Containers []*Container
	// Attempts is the additive attempts section (attempts.go).
	Attempts []*AttemptSet
	// Land is the additive land section (land.go), nil before a land.
	Land *Land
}

// Container is one entry of swarm-state.json's containers array.
type Container struct {
	ContainerID   string
	ContainerName string
	TaskFilePath  string
	BranchName    string
	Status        ContainerStatus
	PRURL         *string // nil is written as null
	StoryProgress Progress
	CreatedAt     time.Time
	UpdatedAt     time.Time
	ACPPID        *int // nil is written as null
}

// Progress is a container's storyProgress. Skipped stories count in none of
// Completed, Failed, InProgress and Pending.
type Progress struct {
	Total      int `json:"total"`
	Completed  int `json:"completed"`
	Failed     int `json:"failed"`
	InProgress int `json:"inProgress"`
	Pending    int `json:"pending"`
}

// Skipped is the number of stories counted in none of the four counters.
func (p Progress) Skipped() int {
	n := p.Total - p.Completed - p.Failed - p.InProgress - p.Pending
	if n < 0 {
		return 0
	}
	return n
}

// jsonTime writes a time as RFC 3339 in UTC (decode.go reads it).
type jsonTime time.Time

// MarshalText rather than MarshalJSON: encoding/json checks and compacts
// what a MarshalJSON returns, per value, and a state has two times per
// container. An RFC 3339 time needs no escaping, so the JSON is the same.
func (t jsonTime) MarshalText() ([]byte, error) {
	return time.Time(t).UTC().AppendFormat(make([]byte, 0, len(time.RFC3339Nano)), time.RFC3339Nano), nil
}

// The wire shapes: exactly the schema's fields, prUrl and acpPid always
// present (null when unset).
type swarmJSON struct {
	SwarmID    string           `json:"swarmId"`
	CreatedAt  jsonTime         `json:"createdAt"`
	UpdatedAt  jsonTime         `json:"updatedAt"`
	Containers []*containerJSON `json:"containers"`
	Attempts   []*AttemptSet    `json:"attempts,omitempty"`
	Land       *Land            `json:"land,omitempty"`
}

type containerJSON struct {
	ContainerID   string          `json:"containerId"`
	ContainerName string          `json:"containerName"`
	TaskFilePath  string          `json:"taskFilePath"`
	BranchName    string          `json:"branchName"`
	Status        ContainerStatus `json:"status"`
	PRURL         *string         `json:"prUrl"`
	StoryProgress Progress        `json:"storyProgress"`
	CreatedAt     jsonTime        `json:"createdAt"`
	UpdatedAt     jsonTime        `json:"updatedAt"`
	ACPPID        *int            `json:"acpPid"`
}

// MarshalJSON writes the schema's shape; a nil container list is [].
func (s *Swarm) MarshalJSON() ([]byte, error) {
	// The entries' wire shapes directly, not through Container.MarshalJSON:
	// encoding/json would check and compact each entry's bytes once more.
	cs := make([]*containerJSON, len(s.Containers))
	shapes := make([]containerJSON, len(s.Containers))
	for i, c := range s.Containers {
		if c != nil {
			shapes[i] = c.wire()
			cs[i] = &shapes[i]
		}
	}
	return json.Marshal(swarmJSON{s.SwarmID, jsonTime(s.CreatedAt), jsonTime(s.UpdatedAt), cs, s.Attempts, s.Land})
}

// UnmarshalJSON reads the schema's shape, leniently (see decode.go). Times
// come back in UTC.
func (s *Swarm) UnmarshalJSON(b []byte) error { return decodeSwarm(b, s) }

// MarshalJSON writes the schema's shape.
func (c *Container) MarshalJSON() ([]byte, error) { return json.Marshal(c.wire()) }

func (c *Container) wire() containerJSON {
	return containerJSON{c.ContainerID, c.ContainerName, c.TaskFilePath, c.BranchName,
		c.Status, c.PRURL, c.StoryProgress, jsonTime(c.CreatedAt), jsonTime(c.UpdatedAt), c.ACPPID}
}

// UnmarshalJSON reads the schema's shape, leniently (see decode.go).
func (c *Container) UnmarshalJSON(b []byte) error { return decodeContainer(b, c) }

// Clone returns a deep copy.
func (s *Swarm) Clone() *Swarm {
	if s == nil {
		return nil
	}
	out := *s
	out.Containers = make([]*Container, len(s.Containers))
	for i, c := range s.Containers {
		out.Containers[i] = c.Clone()
	}
	if s.Attempts != nil {
		out.Attempts = make([]*AttemptSet, len(s.Attempts))
		for i, a := range s.Attempts {
			out.Attempts[i] = a.Clone()
		}
	}
	out.Land = s.Land.Clone()
	return &out
}

// Clone returns a deep copy.
func (c *Container) Clone() *Container {
	if c == nil {
		return nil
	}
	out := *c
	if c.PRURL != nil {
		u := *c.PRURL
		out.PRURL = &u
	}
	if c.ACPPID != nil {
		p := *c.ACPPID
		out.ACPPID = &p
	}
	return &out
}

// Container returns the entry with the given name, or nil.
func (s *Swarm) Container(name string) *Container {
	for _, c := range s.Containers {
		if c.ContainerName == name {
			return c
		}
	}
	return nil
}

// ContainerForTask returns the entry that runs the task file at path (as
// recorded, relative to the repository), or nil. Names are not a key a
// caller can count on: a name another container holds gets a suffix.
func (s *Swarm) ContainerForTask(path string) *Container {
	for _, c := range s.Containers {
		if c.TaskFilePath == path {
			return c
		}
	}
	return nil
}

// Patterns of the schema (spec/swarm-state.schema.json).
var (
	swarmIDRe       = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	containerIDRe   = regexp.MustCompile(`^[0-9a-f]{12,64}$`)
	containerNameRe = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)
)

// Validate reports every way the swarm would fail the schema, joined, or nil.
// Save calls it, so an invalid state is never written.
func (s *Swarm) Validate() error { return s.validate(nil) }

// validate is Validate that skips containers whose JSON encoding is in
// unchanged.
func (s *Swarm) validate(unchanged map[string]bool) error {
	var errs []error
	if !swarmIDRe.MatchString(s.SwarmID) {
		errs = append(errs, fmt.Errorf("swarmId %q is not a lowercase UUID v4", s.SwarmID))
	}
	if s.CreatedAt.IsZero() || s.UpdatedAt.IsZero() {
		errs = append(errs, errors.New("swarm createdAt and updatedAt must be set"))
	}
	for i, c := range s.Containers {
		if c == nil {
			errs = append(errs, fmt.Errorf("containers[%d] is null", i))
			continue
		}
		if unchanged != nil {
			if b, err := json.Marshal(c); err == nil && unchanged[string(b)] {
				continue
			}
		}
		if err := c.validate(); err != nil {
			errs = append(errs, fmt.Errorf("containers[%d] (%s): %w", i, c.ContainerName, err))
		}
	}
	return errors.Join(errs...)
}

func (c *Container) validate() error {
	var errs []error
	if !containerIDRe.MatchString(c.ContainerID) {
		errs = append(errs, fmt.Errorf("containerId %q is not 12 to 64 lowercase hex digits (create the container before saving it)", c.ContainerID))
	}
	if !containerNameRe.MatchString(c.ContainerName) {
		errs = append(errs, fmt.Errorf("containerName %q does not match %s", c.ContainerName, containerNameRe))
	}
	if err := gitref.CheckBranch(c.BranchName); err != nil {
		errs = append(errs, fmt.Errorf("branchName: %w", err))
	}
	if !c.Status.valid() {
		errs = append(errs, fmt.Errorf("status %q is not one of pending, running, completed, failed, stopped", c.Status))
	}
	if c.PRURL != nil {
		if u, err := url.Parse(*c.PRURL); err != nil || u.Scheme == "" {
			errs = append(errs, fmt.Errorf("prUrl %q is not an absolute URI", *c.PRURL))
		}
	}
	p := c.StoryProgress
	if p.Total < 0 || p.Completed < 0 || p.Failed < 0 || p.InProgress < 0 || p.Pending < 0 {
		errs = append(errs, fmt.Errorf("storyProgress has a negative counter: %+v", p))
	}
	if c.CreatedAt.IsZero() || c.UpdatedAt.IsZero() {
		errs = append(errs, errors.New("createdAt and updatedAt must be set"))
	}
	if c.ACPPID != nil && *c.ACPPID < 1 {
		errs = append(errs, fmt.Errorf("acpPid %d is not positive", *c.ACPPID))
	}
	return errors.Join(errs...)
}
