package cluster

import "testing"

func TestFreePortNeverHandsOutAPortTwice(t *testing.T) {
	// The kernel picking ports it picked before, as it may once they are released.
	picks := []int{40001, 40001, 40002, 40003, 40002, 40004, 40001, 40005}
	saved, savedHanded := pickPort, handedOut.ports
	defer func() { pickPort, handedOut.ports = saved, savedHanded }()
	handedOut.ports = map[int]bool{}
	released := 0
	pickPort = func() (int, func(), error) {
		p := picks[0]
		picks = picks[1:]
		return p, func() { released++ }, nil
	}
	var got []int
	for range 3 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p)
	}
	pair, err := freePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, pair...)
	want := []int{40001, 40002, 40003, 40004, 40005}
	if len(got) != len(want) {
		t.Fatalf("ports %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ports %v, want %v", got, want)
		}
	}
	if released != 8 {
		t.Fatalf("%d picks released, want all 8", released)
	}
}
