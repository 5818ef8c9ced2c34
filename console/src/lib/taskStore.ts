// Live task states for the Job page's canvas, one subscription per task: a change to one
// task wakes only the canvas node that shows it (useSyncExternalStore in TaskNode), never
// the whole graph.

export interface LiveTask {
  state: string;
  reason: string;
  attempt: number;
  progress: string; // what its box says of its progress (lib/progress.ts), '' for nothing
  exit: string; // how a failed task's failed replica ended ("exit 3"), '' otherwise
}

export class TaskStore {
  private values = new Map<string, LiveTask>();
  private listeners = new Map<string, Set<() => void>>();
  private eventAt = new Map<string, number>(); // when update() last told of the task (now())

  // `now`: a clock in milliseconds, the same one the caller stamps its reads with.
  constructor(private now: () => number = () => performance.now()) {}

  get(name: string): LiveTask | undefined {
    return this.values.get(name);
  }

  // Returns whether the value changed (and its listeners were told).
  set(name: string, v: LiveTask): boolean {
    const old = this.values.get(name);
    if (old && old.state === v.state && old.reason === v.reason && old.attempt === v.attempt && old.progress === v.progress && old.exit === v.exit)
      return false;
    this.values.set(name, v);
    this.listeners.get(name)?.forEach((l) => l());
    return true;
  }

  // A task event's news (state, reason, attempt): what only the job's detail tells (progress,
  // exit) stays as it was until the detail is read again.
  update(name: string, v: Pick<LiveTask, 'state' | 'reason' | 'attempt'>): boolean {
    const old = this.values.get(name);
    this.eventAt.set(name, this.now());
    return this.set(name, { progress: old?.progress ?? '', exit: old?.exit ?? '', ...v });
  }

  // A job detail's view of the task, read from a request sent at `readAt` (now()): ignored
  // when an event told of the task after that, since the read may show it as it was before
  // the event (a task back at Running after its Succeeded). The read that follows the event
  // brings the task's detail.
  setFromRead(name: string, v: LiveTask, readAt: number): boolean {
    if ((this.eventAt.get(name) ?? -Infinity) > readAt) return false;
    return this.set(name, v);
  }

  subscribe(name: string, listener: () => void): () => void {
    let set = this.listeners.get(name);
    if (!set) this.listeners.set(name, (set = new Set()));
    set.add(listener);
    return () => {
      set!.delete(listener);
    };
  }

  names(): string[] {
    return [...this.values.keys()];
  }
}
