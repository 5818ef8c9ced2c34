# The lifecycle vocabulary on the wire: a replica attempt's state and why it ended.
# Same enumerants, same order, as common/lifecycle/states.h (the conversion checks it);
# text for people travels beside them (`reason`), never instead of them.
@0xf6c0615c94529653;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("yard::schema");

enum ReplicaState {
  placed @0;
  starting @1;
  running @2;
  exited @3;
  killed @4;
  oomKilled @5;
  lost @6;
}

enum EndCause {
  none @0;
  exited @1;            # the process exited by itself (exitCode; 0 = success)
  signal @2;            # a signal Yard did not send ended it
  oomKilled @3;
  deadline @4;          # maxLifetime or a run's timeout
  imagePullFailed @5;   # never ran: the image could not be pulled
  agentFailure @6;      # the agent could not start or keep it
  nodeLost @7;
  stoppedByUser @8;
  stoppedByPolicy @9;
  restartLimit @10;     # the launcher restarted its workers more often than allowed (a failure)
  preempted @11;        # stopped to make room for another job; the job is requeued
}
