// The task kinds' descriptors as GET /api/v1/kinds serves them (kinds.json, the contract's
// fixture, following docs/design.md §2 "Task kinds and roles"): what the lib functions get
// in the tests instead of the query cache's copy.
import type { KindsJson } from '../src/api/types';
import fixture from './kinds.json';

export const KINDS = (fixture as KindsJson).kinds;
