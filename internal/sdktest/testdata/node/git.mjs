// git clone from the repository the Go test serves on loopback (args.url;
// branches main and feature), then status and branches of the clones. The
// Go test checks the clones on disk.
export default function steps({ work, args }) {
  return [
    ['clone', async (s) => {
      await s.git.clone(args.url, `${work}/repo`);
    }],
    ['clone-branch', async (s) => {
      await s.git.clone(args.url, `${work}/repo-feature`, 'feature');
    }],
    ['status', async (s) => {
      const st = await s.git.status(`${work}/repo`);
      return { currentBranch: st.currentBranch, fileStatus: st.fileStatus ?? [] };
    }],
    ['branches', async (s) => (await s.git.branches(`${work}/repo-feature`)).branches],
  ];
}
