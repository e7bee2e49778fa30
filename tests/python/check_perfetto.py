#!/usr/bin/env python3
"""Checks a Perfetto trace that `ttrace-reader export --format perfetto` wrote, with the
official schema: the `perfetto` package's perfetto_trace_pb2 (pip install perfetto protobuf).

Usage: check_perfetto.py TRACE

Every packet is checked: each track an event or a track names is described before it;
each packet sequence clears its incremental state in its first packet and needs it in the
others; every interned string is defined on its sequence before it is used, and once;
the slices of each track nest (an end closes a slice begun on its track); the trace's
clock is named by its first clock snapshot, every snapshot ties its clocks to REALTIME, and
an event's clock is the trace's or one a snapshot on its sequence defined before it. On
success it prints the track events as JSON, one object per event (time, its wall-clock time
through the snapshots, writer, track, name, category, typed arguments, flows, counter
value), for the test to compare with `dump`; on a failure, one line on stderr and exit
status 1.
"""

import json
import sys

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

CLEARED = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
NEEDS = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
REALTIME = pb.BUILTIN_CLOCK_REALTIME
BEGIN, END, INSTANT, COUNTER = (
    pb.TrackEvent.TYPE_SLICE_BEGIN,
    pb.TrackEvent.TYPE_SLICE_END,
    pb.TrackEvent.TYPE_INSTANT,
    pb.TrackEvent.TYPE_COUNTER,
)


class Bad(Exception):
    pass


def value(a):
    kind = a.WhichOneof("value")
    if kind == "bool_value":
        return {"Bool": a.bool_value}
    if kind == "uint_value":
        return {"Uint": a.uint_value}
    if kind == "int_value":
        return {"Int": a.int_value}
    if kind == "double_value":
        return {"Double": a.double_value}
    if kind == "string_value":
        return {"Str": a.string_value}
    if kind == "pointer_value":
        return {"Pointer": a.pointer_value}
    raise Bad(f"an annotation of kind {kind}")


def check(path):
    trace = pb.Trace()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())
    tracks = {}  # uuid -> descriptor
    sequences = {}  # id -> {"default": uuid, "strings": {(kind, iid): text}, "clock": id}
    # Clock id (a sequence's own, 64 to 127, as (sequence, id)) -> (its time, REALTIME then).
    clocks = {}
    trace_clock = None
    events = []
    for n, p in enumerate(trace.packet):
        where = f"packet {n}"
        if p.HasField("clock_snapshot"):
            c = p.clock_snapshot
            if trace_clock is None:
                if c.primary_trace_clock != REALTIME:
                    raise Bad(f"{where}: the first clock snapshot names no REALTIME trace clock")
                trace_clock = REALTIME
            elif c.HasField("primary_trace_clock") and c.primary_trace_clock != trace_clock:
                raise Bad(f"{where}: a clock snapshot names another trace clock")
            times = {k.clock_id: k.timestamp for k in c.clocks}
            if REALTIME not in times or len(times) != len(c.clocks) or len(times) < 2:
                raise Bad(f"{where}: a clock snapshot of {sorted(times)}, not a clock and REALTIME")
            for k, t in times.items():
                if 64 <= k < 128:
                    if not p.HasField("trusted_packet_sequence_id"):
                        raise Bad(f"{where}: a sequence's clock {k} on no sequence")
                    clocks[(p.trusted_packet_sequence_id, k)] = (t, times[REALTIME])
            continue
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            if d.HasField("parent_uuid") and d.parent_uuid not in tracks:
                raise Bad(f"{where}: track {d.uuid} under {d.parent_uuid}, not described before")
            # A thread or process track is described again when renamed; no other.
            if d.uuid in tracks and not (d.HasField("thread") or d.HasField("process")):
                raise Bad(f"{where}: track {d.uuid} described twice")
            tracks[d.uuid] = d
            continue
        if not p.HasField("track_event"):
            raise Bad(f"{where}: neither a track nor a track event")
        if not p.HasField("trusted_packet_sequence_id"):
            raise Bad(f"{where}: an event on no sequence")
        if not p.HasField("timestamp"):
            raise Bad(f"{where}: an event without a time")
        sid = p.trusted_packet_sequence_id
        seq = sequences.get(sid)
        if seq is None:
            if not p.sequence_flags & CLEARED:
                raise Bad(f"{where}: sequence {sid} does not clear its state first")
            seq = sequences[sid] = {"default": None, "strings": {}, "clock": None}
            defaults = p.trace_packet_defaults.track_event_defaults
            if defaults.HasField("track_uuid"):
                seq["default"] = defaults.track_uuid
            if p.trace_packet_defaults.HasField("timestamp_clock_id"):
                seq["clock"] = p.trace_packet_defaults.timestamp_clock_id
        elif p.sequence_flags != NEEDS:
            raise Bad(f"{where}: sequence {sid} flags {p.sequence_flags} after its first packet")
        elif p.HasField("trace_packet_defaults"):
            raise Bad(f"{where}: defaults after the first packet of {sid}")
        strings = seq["strings"]
        interned = p.interned_data
        for kind, entries in (
            ("category", interned.event_categories),
            ("name", interned.event_names),
            ("annotation", interned.debug_annotation_names),
        ):
            for e in entries:
                if (kind, e.iid) in strings:
                    raise Bad(f"{where}: {kind} iid {e.iid} defined twice on {sid}")
                strings[(kind, e.iid)] = e.name

        def lookup(kind, iid):
            if (kind, iid) not in strings:
                raise Bad(f"{where}: {kind} iid {iid} used before it is defined on {sid}")
            return strings[(kind, iid)]

        e = p.track_event
        track = e.track_uuid if e.HasField("track_uuid") else seq["default"]
        if track is None or track not in tracks:
            raise Bad(f"{where}: an event on track {track}, not described before")
        thread = tracks.get(seq["default"])
        if thread is None or not thread.HasField("thread"):
            raise Bad(f"{where}: sequence {sid}'s default track is no thread's")
        # The event's time on the wall clock, through the snapshot of its clock.
        clock = p.timestamp_clock_id if p.HasField("timestamp_clock_id") else seq["clock"]
        if clock is None or clock == trace_clock:
            realtime = p.timestamp if trace_clock == REALTIME else None
        elif 64 <= clock < 128 and (sid, clock) in clocks:
            at, wall = clocks[(sid, clock)]
            realtime = wall + p.timestamp - at
        else:
            raise Bad(f"{where}: an event of clock {clock}, which no snapshot on {sid} defined")
        if realtime is None:
            raise Bad(f"{where}: an event whose wall-clock time no snapshot tells")
        out = {
            "ns": p.timestamp,
            "realtime": realtime,
            "kind": e.type,
            "track": track,
            "pid": thread.thread.pid,
            "tid": thread.thread.tid,
            "on_thread": track == seq["default"],
            "flows": list(e.flow_ids),
        }
        if e.type == COUNTER:
            if not tracks[track].HasField("counter"):
                raise Bad(f"{where}: a counter value on track {track}, no counter track")
            out["name"] = tracks[track].name
            out["category"] = ""
            out["args"] = []
            out["value"] = (
                {"Double": e.double_counter_value}
                if e.HasField("double_counter_value")
                else {"Int": e.counter_value}
            )
        else:
            if len(e.category_iids) != 1:
                raise Bad(f"{where}: {len(e.category_iids)} categories")
            out["name"] = lookup("name", e.name_iid)
            out["category"] = lookup("category", e.category_iids[0])
            out["args"] = [[lookup("annotation", a.name_iid), value(a)] for a in e.debug_annotations]
            out["value"] = None
        events.append(out)
    # Slices nest per track, in time order (packets of one time in file order).
    depth = {}
    for e in sorted(events, key=lambda e: e["ns"]):
        d = depth.get(e["track"], 0)
        if e["kind"] == BEGIN:
            depth[e["track"]] = d + 1
        elif e["kind"] == END:
            if d == 0:
                raise Bad(f"{e['name']} at {e['ns']} ends no slice on track {e['track']}")
            depth[e["track"]] = d - 1
    return events


def main():
    if len(sys.argv) != 2:
        print("usage: check_perfetto.py TRACE", file=sys.stderr)
        sys.exit(2)
    try:
        events = check(sys.argv[1])
    except Bad as e:
        print(f"{sys.argv[1]}: {e}", file=sys.stderr)
        sys.exit(1)
    json.dump(events, sys.stdout)


if __name__ == "__main__":
    main()
