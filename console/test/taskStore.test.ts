import { describe, expect, it } from 'vitest';
import { TaskStore } from '../src/lib/taskStore';

describe('TaskStore', () => {
  it('wakes only the listeners of the task that changed', () => {
    const s = new TaskStore();
    const calls: string[] = [];
    for (let i = 0; i < 1000; i++) s.subscribe(`t${i}`, () => calls.push(`t${i}`));
    s.set('t7', { state: 'Running', reason: '', attempt: 0, progress: '', exit: '' });
    expect(calls).toEqual(['t7']);
    // the same value again is no change
    expect(s.set('t7', { state: 'Running', reason: '', attempt: 0, progress: '', exit: '' })).toBe(false);
    expect(calls).toEqual(['t7']);
    s.set('t7', { state: 'Succeeded', reason: '', attempt: 0, progress: '', exit: '' });
    expect(calls).toEqual(['t7', 't7']);
    expect(s.get('t7')?.state).toBe('Succeeded');
  });
  it('stops calling an unsubscribed listener', () => {
    const s = new TaskStore();
    let n = 0;
    const off = s.subscribe('a', () => n++);
    s.set('a', { state: 'Queued', reason: '', attempt: 0, progress: '', exit: '' });
    off();
    s.set('a', { state: 'Running', reason: '', attempt: 0, progress: '', exit: '' });
    expect(n).toBe(1);
  });
});

describe('TaskStore.update', () => {
  it("keeps what only the job's detail tells, and wakes on a progress change", () => {
    const s = new TaskStore();
    let n = 0;
    s.subscribe('a', () => n++);
    s.set('a', { state: 'Running', reason: '', attempt: 0, progress: '1/2 running', exit: '' });
    s.update('a', { state: 'Failed', reason: 'replica worker/1 exited with code 3', attempt: 0 });
    expect(s.get('a')).toEqual({ state: 'Failed', reason: 'replica worker/1 exited with code 3', attempt: 0, progress: '1/2 running', exit: '' });
    expect(s.set('a', { ...s.get('a')!, exit: 'exit 3' })).toBe(true);
    expect(n).toBe(3);
  });
});

describe('TaskStore.setFromRead', () => {
  it('keeps a state an event told of after the read was sent, and takes later reads', () => {
    let clock = 0;
    const s = new TaskStore(() => clock);
    const v = (state: string) => ({ state, reason: '', attempt: 0, progress: '', exit: '' });
    expect(s.setFromRead('a', v('Running'), 0)).toBe(true); // no event yet: the read is taken
    clock = 10;
    const readAt = 10; // a read is sent...
    clock = 20;
    s.update('a', { state: 'Succeeded', reason: '', attempt: 0 }); // ...an event comes...
    clock = 30;
    // ...and the read's answer, from before the event, does not take the task back to Running
    expect(s.setFromRead('a', v('Running'), readAt)).toBe(false);
    expect(s.get('a')?.state).toBe('Succeeded');
    // another task of the same read is taken
    expect(s.setFromRead('b', v('Running'), readAt)).toBe(true);
    // the read sent after the event is taken: its progress and exit with it
    expect(s.setFromRead('a', { ...v('Succeeded'), progress: '1/1 succeeded' }, 25)).toBe(true);
    expect(s.get('a')?.progress).toBe('1/1 succeeded');
  });
});
