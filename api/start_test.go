package api

import (
	"errors"
	"testing"
)

func TestStartRequestCheck(t *testing.T) {
	tf := []string{".aimi/tasks/a-tasks.json"}
	for _, tc := range []struct {
		name  string
		req   StartRequest
		field string // "" when the request passes
	}{
		{"task files and nothing else pass", StartRequest{TaskFiles: tf}, ""},
		{"no task file is refused", StartRequest{}, "taskFiles"},
		{"a negative max is refused", StartRequest{TaskFiles: tf, Max: -1}, "max"},
		{"append with force is refused", StartRequest{TaskFiles: tf, Append: true, Force: true}, "force"},
		{"an empty task file path is refused by its index", StartRequest{TaskFiles: append(tf, "")}, "taskFiles[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.req.Check()
			var fe *FieldError
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("Check() = %v, want nil", err)
			case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, ErrInvalidRequest)):
				t.Fatalf("Check() = %v, want a field error of %s that is ErrInvalidRequest", err, tc.field)
			}
		})
	}
}

func TestStartRequestChecksAttempts(t *testing.T) {
	ok := StartRequest{TaskFiles: []string{"a"}, Attempts: 16, AttemptsStop: "first-verified"}
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
	for _, r := range []StartRequest{{TaskFiles: []string{"a"}, Attempts: 17}, {TaskFiles: []string{"a"}, Attempts: -1}, {TaskFiles: []string{"a"}, AttemptsStop: "first"}} {
		var fe *FieldError
		if err := r.Check(); !errors.As(err, &fe) || (fe.Field != "attempts" && fe.Field != "attemptsStop") {
			t.Errorf("%+v: %v, want a field error on attempts", r, err)
		}
	}
}
