//! The closedness groups of a vertex, as data (what `closedness` does with them): one group
//! per closedness id that reached the vertex, holding the arcs its struct literals declare
//! (as a bit set over arc indices: arcs are only appended), its pattern filters, the groups it
//! absorbed, and where its closed struct is written. Kept small: a vertex under definitions
//! holds several, and the render holds tens of thousands of such vertices; a vertex without
//! groups holds no allocation.

use super::*;

/// A set of a vertex's arcs by their index in its arc map (arcs are only appended, and are
/// cleared only together with the groups, in `reset`): a group records the fields its
/// literals declare without hashing or copying their labels. The first 64 indices are inline.
#[derive(Clone, Debug, Default)]
pub(super) struct ArcSet {
    low: u64,
    high: Option<Box<[u64]>>,
}

impl ArcSet {
    #[inline]
    pub(super) fn insert(&mut self, i: usize) {
        if i < 64 {
            self.low |= 1 << i;
            return;
        }
        let w = i / 64 - 1;
        let len = self.high.as_ref().map_or(0, |h| h.len());
        if len <= w {
            let mut words = self.high.take().map(Vec::from).unwrap_or_default();
            words.resize(w + 1, 0);
            self.high = Some(words.into_boxed_slice());
        }
        if let Some(x) = self.high.as_mut().and_then(|h| h.get_mut(w)) {
            *x |= 1 << (i % 64);
        }
    }

    #[inline]
    pub(super) fn contains(&self, i: usize) -> bool {
        if i < 64 {
            return self.low & (1 << i) != 0;
        }
        self.high
            .as_ref()
            .and_then(|h| h.get(i / 64 - 1))
            .is_some_and(|x| x & (1 << (i % 64)) != 0)
    }
}

/// The closedness groups of a vertex with the group of each closedness id: boxed, as four in
/// five vertices have none (48 bytes each saved), and the id index a short list searched in
/// order (a hash map was one allocation and a rehash per vertex with groups).
#[derive(Clone, Debug, Default)]
pub(super) struct Groups(Option<Box<GroupsInner>>);

#[derive(Clone, Debug, Default)]
struct GroupsInner {
    pub(super) list: Vec<Group>,
    /// The ids aliased to a group created for another id (see [`Groups::group_of`]).
    of: Vec<(u32, usize)>,
}

/// What an absent [`Groups`] box reads as.
static NO_GROUPS: [Group; 0] = [];

impl Groups {
    pub(super) fn as_slice(&self) -> &[Group] {
        self.0.as_ref().map_or(&NO_GROUPS, |x| &x.list)
    }

    pub(super) fn len(&self) -> usize {
        self.as_slice().len()
    }

    pub(super) fn iter(&self) -> std::slice::Iter<'_, Group> {
        self.as_slice().iter()
    }

    pub(super) fn get(&self, g: usize) -> Option<&Group> {
        self.as_slice().get(g)
    }

    pub(super) fn clear(&mut self) {
        self.0 = None;
    }

    /// Appends `g`; returns its index.
    #[inline]
    pub(super) fn push(&mut self, g: Group) -> usize {
        let x = self.0.get_or_insert_with(Default::default);
        // Most vertices with groups have one: the first is allocated alone.
        if x.list.capacity() == 0 {
            x.list.reserve_exact(1);
        }
        x.list.push(g);
        x.list.len() - 1
    }

    /// The group of closedness id `id`: the group created for it (its `owner`), else the
    /// group it was aliased to (`of`). An id has at most one of the two: a group is created
    /// for an id only when it has none, and an id is aliased only when it has none.
    #[inline]
    pub(super) fn group_of(&self, id: u32) -> Option<usize> {
        let x = self.0.as_ref()?;
        x.list
            .iter()
            .position(|g| id != 0 && g.owner == id)
            .or_else(|| x.of.iter().find(|(k, _)| *k == id).map(|(_, g)| *g))
    }

    /// Records group `g` for `id` unless `id` has a group already.
    #[inline]
    pub(super) fn set_group_of(&mut self, id: u32, g: usize) {
        if self.group_of(id).is_none() {
            self.0.get_or_insert_with(Default::default).of.push((id, g));
        }
    }
}

impl std::ops::Index<usize> for Groups {
    type Output = Group;
    fn index(&self, g: usize) -> &Group {
        &self.as_slice()[g]
    }
}

impl std::ops::IndexMut<usize> for Groups {
    fn index_mut(&mut self, g: usize) -> &mut Group {
        &mut self.0.get_or_insert_with(Default::default).list[g]
    }
}

/// A closedness group of a vertex (see `closedness`); 48 bytes, as a vertex under
/// definitions holds several and the render holds tens of thousands of such vertices.
#[derive(Clone, Debug, Default)]
pub(super) struct Group {
    /// The arcs (by index, see [`ArcSet`]) the group's literals declare.
    pub(super) labels: ArcSet,
    /// The pattern constraints and the merged groups (see `absorbs`), rarely any.
    pub(super) extra: Option<Box<GroupExtra>>,
    /// The closedness id this group was created for (0 for none: ids start at 1).
    pub(super) owner: u32,
    /// Where the closed struct is written, for a `field not allowed` message (see
    /// `closedness`): the struct literal that declares the group's fields (an index into
    /// `Ev::positions`, 0 for none) ...
    pub(super) src: u32,
    /// ... and the reference that brought the closed value to this vertex (0 for none).
    pub(super) via: u32,
    pub(super) open: bool,
    pub(super) closing: bool,
    /// This group was merged into others (see `Ev::merge_group`): it is no longer checked on
    /// its own, and what it allows counts for each group that absorbs it.
    pub(super) merged: bool,
    /// `src` is a literal whose closedness is the group's own (not one it encloses).
    pub(super) src_direct: bool,
}

/// The rarely used part of a [`Group`].
#[derive(Clone, Debug, Default)]
pub(super) struct GroupExtra {
    /// The label filters of the group's pattern constraints.
    pub(super) patterns: Vec<VId>,
    /// The merged groups whose labels and patterns this group allows as its own.
    pub(super) absorbs: Vec<usize>,
}

impl Group {
    /// The closedness id this group was created for.
    pub(super) fn owner(&self) -> Option<u32> {
        (self.owner != 0).then_some(self.owner)
    }

    pub(super) fn patterns(&self) -> &[VId] {
        self.extra.as_ref().map_or(&[], |x| &x.patterns)
    }

    pub(super) fn absorbs(&self) -> &[usize] {
        self.extra.as_ref().map_or(&[], |x| &x.absorbs)
    }

    pub(super) fn extra_mut(&mut self) -> &mut GroupExtra {
        self.extra.get_or_insert_with(Default::default)
    }
}
