// The task kinds' descriptors (GET /api/v1/kinds, through the query cache) for the
// components of a page that many nodes or fields read: one query observer per page, not one
// per canvas node. Empty while they load or when they could not be read.

import { createContext, useContext } from 'react';
import { useKinds } from '../api/queries';
import type { Kinds } from '../lib/kinds';

export const NO_KINDS: Kinds = [];

export const KindsContext = createContext<Kinds>(NO_KINDS);

export function useKindsContext(): Kinds {
  return useContext(KindsContext);
}

// What a page provides: the descriptors once read.
export function useKindsData(): Kinds {
  return useKinds().data ?? NO_KINDS;
}
